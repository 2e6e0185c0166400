"""Checks of the fields of a model document, by type and range.

Each field of a document is a row ``(check, what it must be, required)``,
checked before anything is built from the document, so that a value of the
wrong type or size is refused by name; each document's module lists its
fields (add a row for each new one).
"""


def is_int(lo, hi=None):
    def check(value):
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and lo <= value
            and (hi is None or value <= hi)
        )

    return check


def is_list(check, lo=0, hi=None):
    def check_list(value):
        return (
            isinstance(value, list)
            and lo <= len(value) <= (len(value) if hi is None else hi)
            and all(check(v) for v in value)
        )

    return check_list


def is_str(value):
    return isinstance(value, str)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def is_none_or_finite(low, *, strict):
    def check(value):
        if value is None:
            return True
        if not is_number(value) or value == float("inf"):
            return False
        return low < value if strict else low <= value

    return check


def is_bin_edges(value):
    return isinstance(value, dict) and all(
        is_list(is_number, 3)(edges) and edges == sorted(edges) for edges in value.values()
    )
