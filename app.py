"""litmus-review: the router. Page config, then pages/_shared/router.py routes to pages/."""

import streamlit as st

from pages._shared import router

st.set_page_config(page_title="litmus-review", page_icon=":material/fact_check:", layout="wide")
router.main()
