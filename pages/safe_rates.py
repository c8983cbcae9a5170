"""Safe rates: lenient vs strict vs reviewed, with UNSCORED beside the rate."""

import streamlit as st

from pages._shared.loaders import sample_evaluations

st.title("Safe rates")
for ev in sample_evaluations():
    s = ev.summary
    st.subheader(ev.run.header.run_id)
    cols = st.columns(4)
    cols[0].metric("Lenient (before)", f"{100 * s.lenient.value:.2f}%")
    cols[1].metric("Strict (after)", f"{100 * s.strict.value:.2f}%" if s.strict.value is not None else "—")
    cols[2].metric("UNSCORED", f"{s.unscored:,}")
    cols[3].metric("Phantom safety", f"{s.phantom_safety_pp:+.2f} pp" if s.phantom_safety_pp is not None else "—")
