"""litmus-review: the router. Pages live in pages/; this file only configures and routes."""

import streamlit as st

st.set_page_config(page_title="litmus-review", layout="wide")
pages = [st.Page("pages/safe_rates.py", title="Safe rates", default=True)]
st.navigation(pages).run()
