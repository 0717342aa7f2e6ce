"""The part of skylib's structs module that rules_go uses."""

def _to_dict(s):
    return {
        key: getattr(s, key)
        for key in dir(s)
        if key != "to_json" and key != "to_proto"
    }

structs = struct(
    to_dict = _to_dict,
)
