"""What a rule's argument condition means, and whether it holds for an argument's value.

A condition is a glob or `{"regex": "..."}`; what a glob means depends on the argument:

- a URL (an argument named `url`/`uri` or ending so, e.g. `image_url`; or any glob written as a URL,
  `https://docs.vendor.test/*`): the value is parsed (urllib.parse) and scheme, host and port must be
  the condition's, then its path must fit the condition's path (`*` crosses `/`: a path prefix), and
  its query too if the condition has one. A longer host, a host after `user@`, another port never
  pass. On a URL argument a glob not written as a URL is refused when a rule is made (`*` for any,
  or an exact value).
- a path (an argument named `path` or ending in `path`, `_dir` or `_file`; or named `file`, `dir`,
  `directory`, `folder`, `filename`): the normalised path (`a//b`, `./a` as `a`) is matched segment by
  segment (wcmatch: `*` stays within a folder, `**` crosses folders).
- anything else: fnmatch on the whole text, a non-string value as its JSON.

A regex is matched by RE2, in time linear in the text whatever the pattern (Python's `re` can take
exponential time: `(a+)+b` on "aaa…c" held a worker, and the GIL, for seconds); on a path or URL
argument it meets the same doubts as a glob.

When in doubt, a deny rule's condition holds and an allow rule's does not: a path with a `..`
segment (an allow never holds; a deny holds when the path leaves its root, else it meets the
normalised path), a URL with `..`, backslashes, spaces or control characters, a URL with userinfo
(allow only). A deny's glob on a path also matches as fnmatch would (`secrets/*` still denies
`secrets/sub/key`), so that no rule written before this module narrowed a deny.
"""
import fnmatch
import json
import posixpath
import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote, urlsplit

import re2
from wcmatch import glob

MAX_PATTERN_CHARS = 200  # a glob's or a regex's length, checked when a rule is made and when matched
# RE2 is linear in the text, times the size of the compiled program: `(?:.{0,900}a)+c` is 8,000
# instructions and takes half a second on 100 kB. Ordinary conditions are tens to a few hundred.
MAX_PROGRAM_SIZE = 1000

_PATH_NAMES = {"path", "file", "dir", "directory", "folder", "filename"}
_PATH_ENDINGS = ("path", "_dir", "_file")
_URL_ENDINGS = ("url", "uri")
_PATH_GLOB = glob.GLOBSTAR | glob.DOTGLOB | glob.FORCEUNIX  # no braces, negation or extglob: * ? [] ** only
_UNSAFE_IN_URL = re.compile(r"[\\\s\x00-\x1f\x7f]")  # parsed differently by different URL parsers
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}


def is_url_argument(name: str) -> bool:
    return name.lower().endswith(_URL_ENDINGS)


def is_path_argument(name: str) -> bool:
    lowered = name.lower()
    return lowered in _PATH_NAMES or lowered.endswith(_PATH_ENDINGS)


def is_url_pattern(pattern: str) -> bool:
    """A glob written as a URL: scheme://host..."""
    return "://" in pattern


def holds(name: str, condition, value, *, deny: bool) -> bool:
    """Whether `condition` holds for argument `name` = `value`, for a deny rule or an allow rule."""
    regex = condition.get("regex") if isinstance(condition, dict) else None
    if not isinstance(condition, str) and not isinstance(regex, str):
        return False
    if isinstance(value, str):
        if is_url_argument(name) or (regex is None and is_url_pattern(condition)):
            return _url_holds(condition, value, deny=deny)
        if is_path_argument(name):
            return _path_holds(condition, value, deny=deny)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    if regex is not None:
        return regex_matches(regex, text) or (deny and regex_matches(regex, _folded(text)))
    # A deny also meets the value as a mail server or a resolver would read it alike: in any case,
    # with compatibility characters folded (`ceo@Competitor.test`, a full-width `．`).
    return fnmatch.fnmatchcase(text, condition) or (deny and fnmatch.fnmatchcase(_folded(text), _folded(condition)))


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def compile_regex(pattern: str):
    """The RE2 program for `pattern`; raises ValueError (in words) if RE2 does not take it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"longer than {MAX_PATTERN_CHARS} characters")
    compiled = _compiled(pattern)
    if compiled is None:
        raise ValueError(_error(pattern))
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(f"too large once compiled ({compiled.programsize} instructions; at most {MAX_PROGRAM_SIZE}): use fewer or smaller repetitions")
    return compiled


def regex_matches(pattern: str, text: str) -> bool:
    """A whole-text match; a pattern RE2 does not take matches nothing (rules are checked when made)."""
    compiled = _compiled(pattern) if len(pattern) <= MAX_PATTERN_CHARS else None
    return compiled is not None and compiled.programsize <= MAX_PROGRAM_SIZE and compiled.fullmatch(text) is not None


def _options():
    options = re2.Options()
    options.log_errors = False  # a refused pattern is said to the rule's maker, not to stderr
    return options


@lru_cache(maxsize=512)
def _compiled(pattern: str):
    try:
        return re2.compile(pattern, _options())
    except re2.error:
        return None


def _error(pattern: str) -> str:
    try:
        re2.compile(pattern, _options())
    except re2.error as exc:
        message = exc.args[0] if exc.args else ""
        return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return "not a regular expression"


def _path_holds(condition, value: str, *, deny: bool) -> bool:
    climbs = ".." in value.split("/")
    if climbs and not deny:
        return False
    path = posixpath.normpath(value) if value else value
    if path == ".." or path.startswith("../"):
        return deny  # leaves the root the tool resolves paths from
    if not deny:
        return _path_fits(condition, path, deny=False)
    # A deny meets every spelling the tool may resolve alike: as given, normalised, without a leading /.
    return any(_path_fits(condition, candidate, deny=True) for candidate in {value, path, path.lstrip("/")})


def _path_fits(condition, path: str, *, deny: bool) -> bool:
    if isinstance(condition, dict):
        return regex_matches(condition["regex"], path)
    return glob.globmatch(path, condition, flags=_PATH_GLOB) or (deny and fnmatch.fnmatchcase(path, condition))


def _url_holds(condition, value: str, *, deny: bool) -> bool:
    if _UNSAFE_IN_URL.search(value):
        return deny
    try:
        got = urlsplit(value)
        got_port = got.port
    except ValueError:
        return deny
    host = (got.hostname or "").rstrip(".")
    if not host.isascii():
        # An HTTP client turns `exfil．attacker．test` into exfil.attacker.test (IDNA): an allow
        # never holds for such a host, and a deny meets it as the client will.
        if not deny:
            return False
        try:
            host = _folded(host).rstrip(".").encode("idna").decode("ascii")
        except UnicodeError:
            return True
    if "@" in got.netloc and not deny:
        return False  # credentials in a URL: `docs.vendor.test@attacker.test` is attacker.test
    if isinstance(condition, dict):
        return bool(host) and regex_matches(condition["regex"], value)
    if condition == "*":
        return True
    if not is_url_pattern(condition):
        # Only an exact value is taken when a rule is made; a glob stored before never allows.
        return value == condition if not _has_wildcard(condition) else deny and fnmatch.fnmatchcase(value, condition)
    try:
        want = urlsplit(condition)
        want_port = want.port
    except ValueError:
        return False
    path = got.path or "/"
    # An allow holds for its scheme, host and port only; a deny for its host on any scheme and port.
    same_place = (
        bool(host)
        and fnmatch.fnmatchcase(host, (want.hostname or "").rstrip("."))
        and (
            deny
            or fnmatch.fnmatchcase(got.scheme, want.scheme.lower())
            and (got_port or _DEFAULT_PORTS.get(got.scheme)) == (want_port or _DEFAULT_PORTS.get(want.scheme.lower()))
        )
    )
    if not same_place:
        return False
    if ".." in unquote(path).split("/") or "%2f" in path.lower():
        return deny  # where the server ends up is not what the text says
    return fnmatch.fnmatchcase(path, want.path or "/") and (not want.query or fnmatch.fnmatchcase(got.query, want.query))


def check(name: str, condition) -> None:
    """Raises ValueError (in words) for a condition that cannot mean what it says."""
    if isinstance(condition, dict):
        try:
            compile_regex(condition["regex"])
        except ValueError as exc:
            raise ValueError(f"The regular expression for {name!r} does not compile in RE2 ({exc}): no backreferences, no lookarounds.") from None
        return
    if is_url_argument(name) or is_url_pattern(condition):
        if condition == "*" or (not is_url_pattern(condition) and not _has_wildcard(condition)):
            return
        try:
            parts = urlsplit(condition)
            parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
        except ValueError:
            parts = None
        if parts is None or not is_url_pattern(condition) or not parts.scheme or not parts.hostname:
            raise ValueError(
                f"The condition on {name!r} is a URL such as https://docs.vendor.test/* (scheme, host, then a path), "
                '* for any, an exact value, or {"regex": "..."}.'
            )


def _has_wildcard(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


def prefill(name: str, value: str) -> str:
    """The condition a rule made from a call starts with for a string argument: a URL's scheme, host
    and folder (`https://docs.vendor.test/*`), a path's folder (`notes/*`), else the value exactly."""
    if is_url_pattern(value) or is_url_argument(name):
        return _url_prefill(value)
    if is_path_argument(name) and ".." not in value.split("/"):
        path = posixpath.normpath(value)
        folder = posixpath.dirname(path)
        return f"{glob.escape(folder, unix=True)}/*" if folder and folder != "/" else glob.escape(path, unix=True)
    return escape(value)


def _url_prefill(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        return escape(value)
    if not parts.scheme or not parts.hostname or _UNSAFE_IN_URL.search(value) or _has_wildcard(parts.hostname):
        return escape(value)
    host = parts.netloc.rpartition("@")[2].lower()  # no userinfo; brackets of an IPv6 host and the port kept
    folder = posixpath.dirname(parts.path) if parts.path else ""
    return f"{parts.scheme}://{host}{escape(folder.rstrip('/'))}/*"  # a host holds no * or ?; an IPv6 one keeps its [ ]


def escape(text: str) -> str:
    """A glob (fnmatch's) matching exactly `text`: its special characters bracketed."""
    return re.sub(r"([*?\[])", r"[\1]", text)
