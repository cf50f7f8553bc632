"""Result records, one concept: the model and its JSON (model.py), the parser that trusts nothing in a record
(parse.py, with the bounded field readers of fields.py), and the store of one file per cell and per build (store.py)."""
