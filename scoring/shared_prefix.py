"""Requests whose prefixes share leading tokens, each shared token computed once.

``score_requests`` computes every request's prefix in full. Requests made from one template
repeat most of theirs: the local annotator asks several questions about each item, each a
request whose prefix is the same instructions, then the same item, then its own question. Here
a batch's prefixes are merged into a tree of tokens (a trie: a token shared by several prefixes
is one node), and each node is fed to the model once, at the position it has in each of its
prefixes. Attention runs in rows, one per subtree under the part every prefix shares: a token
attends to its ancestors in the tree and to itself, so it gets the numbers it gets in each of its
requests alone, and each request's continuations attend to their prefix and themselves as in
``score_requests``. The results are ``scoring.encode.Result``, the same as ``score_requests``
gives for the same requests, from the same runners, head and log-softmax
(``scoring.forward.predictions``).

Only the runners whose attention takes any row layout (``llama``, ``packed``) can share; for the
others (and for requests that ask for their prefix's log-probabilities) the requests go to
``score_requests`` as they are. A batch is fed whole; one whose tree holds more than
``max_tokens`` tokens goes to ``score_requests`` too, which runs a request longer than that in
pieces, so memory stays within the budget (the caller keeps its batches within it).
"""
from __future__ import annotations

import numpy as np
import torch

from scoring import attention, layout, llama
from scoring.encode import Request, Result
from scoring.forward import Packed, base_model, collect, predictions, runner_for, score_requests
from scoring.logits import input_device

SHARING_RUNNERS = ("llama", "packed")


class Tree:
    """The batch's tokens in the order they are fed: each with its parent's index (-1 for a root)
    and its position (depth); prefixes merged, each continuation's fed tokens a chain of their own."""

    def __init__(self):
        self.tokens: list[int] = []
        self.parent: list[int] = []
        self.position: list[int] = []
        self.children: list[dict[int, int]] = []
        self.roots: dict[int, int] = {}

    def add(self, token: int, parent: int, shared: bool = True) -> int:
        """The index of ``token`` under ``parent`` (-1: a root): an existing node when ``shared``."""
        siblings = self.roots if parent < 0 else self.children[parent]
        if shared and token in siblings:
            return siblings[token]
        self.tokens.append(token)
        self.parent.append(parent)
        self.position.append(0 if parent < 0 else self.position[parent] + 1)
        self.children.append({})
        if shared:
            siblings[token] = len(self.tokens) - 1
        return len(self.tokens) - 1

    def path(self, tokens: list[int], start: int = -1, shared: bool = True) -> list[int]:
        """The nodes of ``tokens`` fed after node ``start``."""
        nodes = []
        for token in tokens:
            start = self.add(token, start, shared)
            nodes.append(start)
        return nodes

    def rows(self) -> list[list[int]]:
        """One row per subtree under the trunk (the chain of nodes every token descends from),
        each starting with the trunk; a node's subtree follows it, so parents come before children."""
        below = [[] for _ in self.tokens]
        for i, p in enumerate(self.parent):  # children, shared or not, in feeding order
            if p >= 0:
                below[p].append(i)
        trunk, tops = [], list(self.roots.values())
        while len(tops) == 1:
            trunk.append(tops[0])
            tops = below[tops[0]]
        rows = []
        for top in tops:
            row, stack = [], [top]
            while stack:
                i = stack.pop()
                row.append(i)
                stack.extend(reversed(below[i]))
            rows.append(trunk + row)
        return rows or [trunk]

    def groups(self) -> layout.RowGroups:
        """The rows as the runners' row groups: a token sees its ancestors and itself."""
        slot = torch.empty(len(self.tokens), dtype=torch.long)
        groups, offset = [], 0
        for row in self.rows():
            at = {node: k for k, node in enumerate(row)}
            mask = torch.zeros((len(row), len(row)), dtype=torch.bool)
            for k, node in enumerate(row):
                if self.parent[node] >= 0:
                    mask[k] = mask[at[self.parent[node]]]
                mask[k, k] = True
            index = torch.tensor(row, dtype=torch.long)
            groups.append(layout.Group(index, mask[None]))
            slot[index] = torch.arange(offset, offset + len(row))  # a trunk node: its last row (all agree)
            offset += len(row)
        return layout.RowGroups(groups, slot)


def plan(requests: list[Request]) -> tuple[Tree, Packed]:
    """The tree of the requests' tokens and what to read off it, in ``scoring.forward.Packed``'s
    terms: for each predicted token, the node whose state predicts it and its group (the
    request's prefix, then each continuation, as ``scoring.forward.collect`` sums them)."""
    tree = Tree()
    source, target, group = [], [], []
    groups = 0
    for request in requests:
        last = tree.path(request.prefix)[-1]
        groups += 1  # the prefix's own log-probabilities are not asked for here
        for cont in request.conts:
            if cont:  # an empty continuation predicts nothing: its sum is 0
                source += [last] + tree.path(cont[:-1], last, shared=False)
                target += cont
                group += [groups] * len(cont)
            groups += 1
    packed = Packed(torch.tensor(tree.tokens, dtype=torch.long), torch.tensor(tree.position, dtype=torch.long), [],
                    np.array(source, dtype=np.int64), np.array(target, dtype=np.int64),
                    np.array(group, dtype=np.int64), groups)
    return tree, packed


def hidden(model, batch: Packed, groups: layout.RowGroups, runner: str) -> torch.Tensor:
    """The final hidden state of every node, through the runner (as ``scoring.forward.hidden_states``
    runs it) with the tree's row groups."""
    device = input_device(model)
    tokens, positions = batch.tokens.to(device), batch.positions.to(device)
    if runner == "llama":
        return llama.PackedLlama(model).hidden(tokens, positions, groups)
    with attention.packed(model, groups, positions):
        return base_model(model)(input_ids=tokens[None], position_ids=positions[None], use_cache=False,
                                 attention_mask=torch.ones((1, len(tokens)), dtype=torch.long,
                                                           device=device)).last_hidden_state[0]


@torch.inference_mode()
def score_shared(model, requests: list[Request], *, pad_id: int, max_tokens: int | None = None) -> list[Result]:
    """``score_requests(model, requests)``'s results, each token of the prefixes computed once."""
    runner = runner_for(model)
    if runner not in SHARING_RUNNERS or any(r.prefix_lp or not r.prefix for r in requests) or not requests:
        return score_requests(model, requests, pad_id=pad_id, max_tokens=max_tokens)
    tree, batch = plan(requests)
    if max_tokens and len(tree.tokens) > max_tokens:
        return score_requests(model, requests, pad_id=pad_id, max_tokens=max_tokens)
    states = hidden(model, batch, tree.groups(), runner)
    logprob, greedy = predictions(model, states, batch.source, batch.target)
    return collect(requests, batch, logprob, greedy)
