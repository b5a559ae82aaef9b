"""Human review: look at one item with everything known about it, record expert verdicts as
annotation records of annotator ``human:NAME``, and take items to and from external labelling
tools.

- ``data``      what review reads (items, scores, annotations, filter decisions)
- ``queues``    which items a reviewer goes through
- ``sections``  the item view, as HTML sections shared by the app and the report's item pages
- ``verdicts``  verdicts as annotation records, every edit kept
- ``server``    the local web app (`curate review`) and its security checks
- ``browser``   static item pages for the report, readable without a server
- ``exchange``  export to / import from Argilla and plain JSON lines
"""
