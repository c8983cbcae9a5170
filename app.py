"""litmus-review: the router. pages/_shared/router.py configures the page and routes to pages/."""

from pages._shared import router

# Streamlit runs this file as __main__; a worker process spawned from it (the parallel importer)
# re-imports it as __mp_main__, where the app must not start.
if __name__ != "__mp_main__":
    router.main()
