"""PMML: textnb's own export and import (exchange), and scoring of any Naive Bayes
PMML document (score, over a streaming parse and PMML's value rules)."""

from .exchange import (ESCAPED, export_file, export_pmml, field_name, import_file, import_pmml,
                       token_of, with_max_features)

__all__ = ["export_pmml", "import_pmml", "export_file", "import_file", "with_max_features",
           "field_name", "token_of", "ESCAPED"]
