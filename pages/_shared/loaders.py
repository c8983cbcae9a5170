"""Cached loaders: the only place pages get data from scoring/."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from scoring.report import Evaluation, evaluate

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"


@st.cache_resource(show_spinner="Scoring sample runs…")
def sample_evaluations() -> list[Evaluation]:
    # cache_resource: Evaluations are frozen dataclasses, shared read-only between sessions.
    out = []
    for path in sorted(SAMPLES.glob("*-m[0-9].jsonl")):
        side = path.with_name(path.name.replace(".jsonl", ".payloads.jsonl"))
        out.append(evaluate(path, payloads=side if side.exists() else None))
    return out
