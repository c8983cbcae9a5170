"""litmus-review: the router. pages/_shared/router.py configures the page and routes to pages/."""

from pages._shared import router

router.main()
