"""The part of skylib's paths module that rules_go uses."""

def _basename(p):
    return p.rpartition("/")[-1]

def _dirname(p):
    prefix, sep, _ = p.rpartition("/")
    if not prefix:
        return sep
    return prefix.rstrip("/")

def _is_absolute(path):
    return path.startswith("/") or (len(path) > 2 and path[1] == ":")

def _join(path, *others):
    result = path
    for p in others:
        if _is_absolute(p):
            result = p
        elif not result or result.endswith("/"):
            result += p
        else:
            result += "/" + p
    return result

def _normalize(path):
    if not path:
        return "."
    prefix = "/" if path.startswith("/") else ""
    pieces = []
    for piece in path.split("/"):
        if piece in ("", "."):
            continue
        if piece == "..":
            if pieces and pieces[-1] != "..":
                pieces.pop()
                continue
            if prefix:
                continue
        pieces.append(piece)
    return (prefix + "/".join(pieces)) or "."

def _relativize(path, start):
    segments = _normalize(path).split("/")
    start_segments = _normalize(start).split("/")
    if start_segments == ["."]:
        start_segments = []
    if len(segments) < len(start_segments) or segments[:len(start_segments)] != start_segments:
        fail("Path '%s' is not beneath '%s'" % (path, start))
    return "/".join(segments[len(start_segments):])

def _split_extension(p):
    b = _basename(p)
    last = b.rfind(".")
    if last <= 0:
        return (p, "")
    dot = len(p) - len(b) + last
    return (p[:dot], p[dot:])

def _replace_extension(p, new_extension):
    return _split_extension(p)[0] + new_extension

paths = struct(
    basename = _basename,
    dirname = _dirname,
    is_absolute = _is_absolute,
    join = _join,
    normalize = _normalize,
    relativize = _relativize,
    replace_extension = _replace_extension,
    split_extension = _split_extension,
)
