"""The part of skylib's collections module that rules_go uses."""

def _uniq(iterable):
    return {x: None for x in iterable}.keys()

collections = struct(
    uniq = _uniq,
)
