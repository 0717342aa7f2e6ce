"""The part of skylib's shell module that rules_go and gazelle use."""

def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

def _array_literal(iterable):
    return "(" + " ".join([_quote(str(i)) for i in iterable]) + ")"

shell = struct(
    array_literal = _array_literal,
    quote = _quote,
)
