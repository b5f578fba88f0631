"""Reading Lean's output: its messages (plain text or the REPL's JSON) and the verdict on a proof.

Pure functions on text, so the protocol is tested on recorded Lean output without a Lean toolchain;
`benchmark/grading/lean.py` runs Lean and hands its output here.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})

# Reasons a verdict gives.
CORRECT, LEAN_ERROR, SORRY, AXIOM, TIMEOUT, CRASHED, GARBAGE, NO_STATEMENT = (
    "correct", "lean_error", "sorry", "axiom", "timeout", "crashed", "garbage", "no_statement")


@dataclass(frozen=True)
class Message:
    severity: str  # "error", "warning" or "info"
    text: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class LeanVerdict:
    correct: bool
    reason: str  # one of the reasons above
    detail: str = ""  # the first error, the offending axiom, the tail of a crash's output
    messages: list = field(default_factory=list)  # Lean's messages as dicts

    def to_dict(self) -> dict:
        return asdict(self)



# ---------------------------------------------------------------------------------------------------------
# Lean's messages


_PLAIN_HEADER = re.compile(
    r"^(?:(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)(?:-\d+:\d+)?: )?"  # position, with -DprintMessageEndPos
    r"(?P<severity>error|warning|info|information)(?:\([^)\s]*\))?: ?(?P<text>.*)$")


def parse_plain(output: str) -> list[Message]:
    """Messages from `lean FILE`'s plain-text output: `FILE:LINE:COL[-LINE:COL]: SEVERITY: text`, the text
    going on over the following lines. Lines before any header (older Lean prints info messages, e.g.
    `#print axioms`, as bare text) form info messages of their own."""
    messages: list[dict] = []
    for raw in output.splitlines():
        match = _PLAIN_HEADER.match(raw)
        if match:
            severity = "info" if match["severity"] == "information" else match["severity"]
            messages.append({"severity": severity, "text": match["text"],
                             "line": int(match["line"]) if match["line"] else None,
                             "column": int(match["col"]) if match["col"] else None})
        elif messages:
            messages[-1]["text"] += "\n" + raw
        elif raw.strip():
            messages.append({"severity": "info", "text": raw, "line": None, "column": None})
    return [Message(**m) for m in messages]


def parse_repl(response: dict) -> list[Message]:
    """Messages from one Lean REPL response: `{"messages": [{"severity", "pos", "data"}], ...}`; a REPL-level
    failure (`{"message": "Lean error: ..."}`) is an error."""
    messages = [Message(m.get("severity", "error"), str(m.get("data", "")),
                        (m.get("pos") or {}).get("line"), (m.get("pos") or {}).get("column"))
                for m in response.get("messages", [])]
    if "message" in response:
        messages.append(Message("error", str(response["message"])))
    return messages


def read_repl_responses(text: str) -> list[dict]:
    """The JSON responses in a REPL transcript (each response a JSON object, responses separated by blank
    lines). Raises ValueError on anything else."""
    decoder, responses, index = json.JSONDecoder(), [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index == len(text):
            return responses
        response, index = decoder.raw_decode(text, index)
        if not isinstance(response, dict):
            raise ValueError(f"a REPL response is a JSON object, not {type(response).__name__}")
        responses.append(response)


# ---------------------------------------------------------------------------------------------------------
# The verdict


_COMMENT = re.compile(r"/-.*?-/|--[^\n]*", re.DOTALL)
_FORBIDDEN_TACTIC = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")
_AXIOM_DECL = re.compile(r"(?<![\w.'])axiom\s+\S")
_SORRY_WARNING = re.compile(r"declaration (?:\S+ )?uses ['`‘]sorry['`’]")
_THEOREM_NAME = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(?:theorem|lemma)\s+([^\s(:{\[⦃]+)",
                           re.MULTILINE)
_AXIOM_REPORT = re.compile(
    r"'(?P<name>[^'\s]\S*?)' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|does not depend on any axioms)")


def theorem_name(statement: str) -> str | None:
    """The name of the first theorem (or lemma) in a statement, e.g. mathd_algebra_10."""
    match = _THEOREM_NAME.search(_COMMENT.sub(" ", statement))
    return match.group(1) if match else None


def forbidden_in_text(proof: str) -> tuple[str, str] | None:
    """(reason, detail) if the proof's text (comments aside) uses sorry/admit or declares an axiom."""
    code = _COMMENT.sub(" ", proof)
    if match := _FORBIDDEN_TACTIC.search(code):
        return SORRY, f"the proof contains `{match.group(1)}`"
    if _AXIOM_DECL.search(code):
        return AXIOM, "the proof declares an axiom"
    return None


def axioms_reported(messages: list[Message], name: str) -> list[str] | None:
    """The axioms that the last `#print axioms name` report in these messages names (ours comes last, after
    anything the proof could print); None if there is no report."""
    reports = [match for message in messages for match in _AXIOM_REPORT.finditer(message.text)
               if match["name"].split(".")[-1] == name.split(".")[-1]]  # Lean may print the name qualified
    if not reports:
        return None
    return [a.strip() for a in (reports[-1]["axioms"] or "").split(",") if a.strip()]


def judge(messages: list[Message], name: str) -> LeanVerdict:
    """The verdict on a file that Lean checked to the end, from its messages."""
    found = [asdict(m) for m in messages]
    errors = [m for m in messages if m.severity == "error"]
    if errors:
        return LeanVerdict(False, LEAN_ERROR, errors[0].text.splitlines()[0][:500], found)
    if any(_SORRY_WARNING.search(m.text) for m in messages if m.severity == "warning"):
        return LeanVerdict(False, SORRY, "declaration uses 'sorry'", found)
    axioms = axioms_reported(messages, name)
    if axioms is None:
        return LeanVerdict(False, GARBAGE, f"no `#print axioms {name}` report in Lean's output", found)
    extra = sorted(set(axioms) - ALLOWED_AXIOMS)
    if extra:
        return LeanVerdict(False, SORRY if extra == ["sorryAx"] else AXIOM, f"uses axioms {', '.join(extra)}", found)
    return LeanVerdict(True, CORRECT, "", found)


def build_source(gold: str, completion: str, name: str) -> str:
    """The file Lean checks: statement with header, proof, then the axiom report."""
    return f"{gold}{completion.rstrip()}\n\n#print axioms {name}\n"


_HEADER_LINE = re.compile(r"^\s*(?:import\s|open\s|set_option\s|--|$)")


def split_header(gold: str) -> tuple[str, str]:
    """(header, rest): the leading import/open/set_option/blank lines, and the statement after them."""
    lines = gold.splitlines(keepends=True)
    cut = 0
    while cut < len(lines) and _HEADER_LINE.match(lines[cut]):
        cut += 1
    return "".join(lines[:cut]), "".join(lines[cut:])
