"""Functions of a release's lm-evaluation-harness task: copied as ``lm_eval_task/utils.py`` into
every release, where lm-eval's yaml loader finds them (``!function utils.NAME``). benchcurate
never imports this module; it must run with lm-eval alone, so it imports only ``datasets``.

``load_release`` reads the released data file relative to this file, so the task runs from
wherever the release folder is. The document functions are lm-eval 0.4.13's own for those
benchmarks (tasks/hellaswag/utils.py, tasks/winogrande/preprocess_winogrande.py,
tasks/super_glue/copa/utils.py; MIT License, Copyright (c) 2020 EleutherAI), unchanged.
"""
import re
from pathlib import Path

import datasets


def load_release(data_files, **_metadata):
    """The task's documents: ``data_files`` ({split: path relative to this file}) as a DatasetDict."""
    here = Path(__file__).resolve().parent
    files = {split: str(here / path) for split, path in data_files.items()}
    kind = "json" if next(iter(files.values())).endswith(".jsonl") else "parquet"
    return datasets.load_dataset(kind, data_files=files)


# --- HellaSwag (lm-eval: tasks/hellaswag/utils.py) ----------------------------------------------

def preprocess(text):
    text = text.strip()
    # NOTE: Brackets are artifacts of the WikiHow dataset portion of HellaSwag.
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


def hellaswag_docs(dataset):
    def _process_doc(doc):
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        out_doc = {
            "query": preprocess(doc["activity_label"] + ": " + ctx),
            "choices": [preprocess(ending) for ending in doc["endings"]],
            "gold": int(doc["label"]),
        }
        return out_doc

    return dataset.map(_process_doc)


# --- Winogrande (lm-eval: tasks/winogrande/preprocess_winogrande.py) ------------------------------

def winogrande_text(doc):
    answer_to_num = {"1": 0, "2": 1}
    return answer_to_num[doc["answer"]]


def winogrande_target(doc):
    idx = doc["sentence"].index("_") + 1
    return doc["sentence"][idx:].strip()


def winogrande_choice(doc):
    idx = doc["sentence"].index("_")
    options = [doc["option1"], doc["option2"]]
    return [doc["sentence"][:idx] + opt for opt in options]


# --- COPA (lm-eval: tasks/super_glue/copa/utils.py) --------------------------------------------

def convert_choice(choice):
    return choice[0].lower() + choice[1:]


def copa_text(doc):
    # Drop the period
    connector = {
        "cause": "because",
        "effect": "therefore",
    }[doc["question"]]
    return doc["premise"].strip()[:-1] + f" {connector}"


def copa_target(doc):
    correct_choice = doc["choice1"] if doc["label"] == 0 else doc["choice2"]
    # Connect the sentences
    return " " + convert_choice(correct_choice)


def copa_choice(doc):
    return [" " + convert_choice(doc["choice1"]), " " + convert_choice(doc["choice2"])]


# --- BoolQ -------------------------------------------------------------------------------------

def boolq_docs(dataset):
    """lm-eval reads the aps/super_glue copy (label 0/1); the google/boolq copy has the same rows
    with ``answer`` false/true, so its label is made from that (the only change to a document)."""
    if "label" in dataset.column_names:
        return dataset
    return dataset.map(lambda doc: {"label": int(doc["answer"])})
