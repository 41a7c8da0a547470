"""A model whose dependency is missing, as SQLFlow's AutoClassifier needs adanet."""

import architecture_search_that_is_not_installed  # noqa: F401


class AutoClassifier:
    pass
