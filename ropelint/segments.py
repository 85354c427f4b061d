"""Cheap text triage: which files, and which definitions of them, can hold RoPE code.

A file the prefilter rejects costs a read and two regex searches. A file it keeps is split at
top-level statement boundaries by a line scan; only the definitions that can build inverse
frequencies, form or cast a phase, take its cos/sin, register rotary state or wrap autocast are
handed to LibCST, as one synthetic module whose lines map back to the file. Large classes are
pruned to their state-defining and rotary methods the same way. When the split is unsure (a parse
error in the synthetic module) the caller parses the whole file, so a wrong split can cost time
but never a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Literal probes first (``in`` is a fast C search); regexes only confirm what a literal found.
_FILE_WORDS = ("freq", "arange", "autocast", "polar", "rotary", "rope", "Rotary", "RoPE")
_ROTARY_LITERALS = ("freq", "phase", "polar", "_cis", "rotary", "rope", "Rotary", "sincos", "theta", "omega")
# A power with an operand on the left (``**kwargs`` has none).
# Either spaced on both sides or on neither: markdown bold in docstrings (``are **not**``) is neither.
_WRAPPER = re.compile(r"return\s+[\w.]*autocast\(|\byield\b")
_DEF_NAME = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")
# A method named for the angles it returns (``phase_table``, ``get_angles``): its callers handle a phase (the
# interpreter reads such a method of a module it cannot see as returning the phase).
ANGLES_METHOD = r"(?:get_|_)?(?:phase|angle)s?(?:_table|_cache|_cached)?"
_ANGLES_METHOD = re.compile(ANGLES_METHOD.encode())
_ROTARY_NAME = re.compile(r"rotary|rope|freq|sincos|sinusoid|position|pos_?emb|\bcis\b|xpos", re.IGNORECASE)

WRAPPER_MAX_LINES = 40
SMALL_HELPER_MAX_LINES = 8
CLASS_PRUNE_MIN_LINES = 120
# Kept whenever another method of the class is: they define state and how casts treat it.
_KEEP_METHODS = {"_apply", "dtype"}  # ``dtype``: a property that tables are cast to
# ``self.scale ** power``: module state raised to a power (an xPos scale, whose rounding the power multiplies).
_STATE_POWER = re.compile(r"self\.\w+\s*\*\*")
# ``torch.sin(self.sinusoid_inp[...])``: cos/sin of state a rotary name calls its own (GPT-J's table in numpy).
_ROTARY_STATE = re.compile(r"self\.\w*(?:rotary|rope|freq|sinusoid|angle|phase|timescale)", re.IGNORECASE)


_FILE_WORDS_BYTES = tuple(word.encode() for word in _FILE_WORDS)


def file_may_hold_rope(text: str | bytes) -> bool:
    """Bytes when the caller has them: half of a model library holds a non-ASCII character, which makes
    its ``str`` wider and every search over it slower."""
    if isinstance(text, bytes):
        return b"torch" in text and any(word in text for word in _FILE_WORDS_BYTES)
    return "torch" in text and any(word in text for word in _FILE_WORDS)


# Words that are rotary values when used as code (``phase = ...``, ``theta**``), prose otherwise; as a name's
# suffix too (``_phase(pos)``, ``rel_angles =``), except ``theta``: ``rope_theta`` is in every model config.
_CODE_WORDS = {
    word: re.compile(rf"(?:[=(\[,*+/-]\s*|^\s*){prefix}{word}\b|{start}{word}\s*(?:[=\[(),:*+/-]|\.\w)",
                     re.MULTILINE)
    for word, prefix, start in (("phase", r"\w*", r"(?:\b|_)"), ("theta", "", r"\b"), ("omega", r"\w*", r"(?:\b|_)"),
                                ("angles", r"\w*", r"(?:\b|_)"), ("timescale", r"\w*", r"(?:\b|_)"),
                                ("timescales", r"\w*", r"(?:\b|_)"))
}


def _rotary_vocabulary(segment: str) -> bool:
    if "freq" in segment:
        start = segment.find("freq")
        while start != -1:
            if not segment.startswith("freque", start):  # frequency, frequencies: not rotary words
                return True
            start = segment.find("freq", start + 1)
    if "sincos" in segment or "polar(" in segment or "_cis" in segment:
        return True
    return any(word in segment and _CODE_WORDS[word].search(segment) is not None for word in _CODE_WORDS)


_TRIG_LITERALS = (".cos(", ".sin(", " cos(", " sin(", "(cos(", "(sin(", "=cos(", "=sin(")


def _has_power(segment: str) -> bool:
    """A power with an operand on each side (not ``**kwargs``), spaced on both sides or on neither
    (not markdown bold), with a non-numeric exponent (not ``x ** 0.5``); or a pow/exp call.
    Scanned by ``str.find``: a regex without a literal prefix is slow on long segments."""
    for word in ("pow(", "exp("):
        start = segment.find(word)
        while start != -1:
            if start == 0 or not (segment[start - 1].isalnum() or segment[start - 1] == "_"):
                return True
            start = segment.find(word, start + 1)
    start = segment.find("**")
    while start != -1:
        before = segment[:start]
        after = segment[start + 2:start + 40]
        spaced_before = before.endswith((" ", "\t"))
        left = before.rstrip(" \t")[-1:]
        right_text = after.lstrip(" \t")
        spaced_after = len(right_text) != len(after)
        right = right_text[:1]
        if left and (left.isalnum() or left in "_)]") and spaced_before == spaced_after \
                and right and (right in "(-_" or right.isalpha()):
            return True
        start = segment.find("**", start + 2)
    return False


def _interesting(segment: str, first_line: str, lines: int, *, method: bool = False) -> bool:
    ranged = "arange(" in segment or "linspace(" in segment
    trig = any(token in segment for token in _TRIG_LITERALS)
    if _rotary_vocabulary(segment):
        if ranged or trig or "register_buffer" in segment or "Buffer(" in segment or "Parameter(" in segment \
                or " @ " in segment or "matmul" in segment or "einsum" in segment or "outer(" in segment:
            return True
    if ranged and _has_power(segment):
        return True
    name = None if method else _DEF_NAME.match(first_line)
    if name and (ranged or trig) and _ROTARY_NAME.search(name.group(1)):
        return True
    # A short function that returns (or yields inside) a disabled autocast may be a local guard wrapper.
    return lines <= WRAPPER_MAX_LINES and "autocast" in segment and first_line.lstrip().startswith(("def ", "@")) \
        and ("enabled" in segment or "float32" in segment) and _WRAPPER.search(segment) is not None


@dataclass(frozen=True)
class Chunk:
    """Lines [file_start, file_start + count) of the file appear at synthetic_start."""

    file_start: int  # 1-based
    synthetic_start: int  # 1-based
    count: int


@dataclass(frozen=True)
class Selection:
    """The synthetic module text and the line map back into the file."""

    code: str
    chunks: tuple[Chunk, ...]
    whole_file: bool

    def to_file_line(self, line: int) -> int:
        for chunk in self.chunks:
            if chunk.synthetic_start <= line < chunk.synthetic_start + chunk.count:
                return chunk.file_start + (line - chunk.synthetic_start)
        return line


def whole(text: str) -> Selection:
    return Selection(text, (Chunk(1, 1, text.count("\n") + 1),), True)


_CONTINUATION = ("else", "elif", "except", "finally")
# The offset scans below run on the file's UTF-8 bytes: a file with one emoji is a 4-byte-per-
# character str, which every substring search would cross four times as slowly.
# A line that starts at column 0 with code: not indented, blank, a comment or a closing bracket.
# The pattern begins with a literal newline, so the scan jumps from line end to line end in C.
_TOP_START = re.compile(rb"\n(?=[^\s#)\]}\\])")
_CLAUSE = re.compile(rb"(?:else|elif|except|finally)\b")
# Every way ``_interesting`` can say yes needs one of these in the block; a block without one is
# skipped without looking further.
# Found with ``str.find`` (a regex alternation without a common prefix tries every position).
# Few and long needles: each costs one pass over the text.
_ANCHORS = (b"arange(", b"linspace(", b"cos(", b"sin(", b"autocast", b"register_buffer", b"Buffer(", b"Parameter(",
            b" @ ", b"matmul", b"einsum", b"outer(")
_HEAD = re.compile(rb"^(?:class |def |async def )", re.MULTILINE)


def _starts(lines: list[str], indent: str, begin: int, end: int) -> list[int]:
    """Indices of lines in [begin, end) that start a statement at exactly ``indent``."""
    out = []
    width = len(indent)
    for i in range(begin, end):
        line = lines[i]
        ch = line[width:width + 1]
        if not ch or ch in " \t#\r\n)]}\\" or (width and not line.startswith(indent)):
            continue
        if ch in "ef" and line.startswith(_CONTINUATION, width):
            word = re.split(r"[\s:(]", line[width:], maxsplit=1)[0]
            if word in _CONTINUATION:
                continue
        out.append(i)
    return out


def _blocks(lines: list[str], starts: list[int], end: int) -> list[tuple[int, int]]:
    """Statement ranges from start lines; a decorator run joins the definition below it."""
    blocks: list[tuple[int, int]] = []
    pending: int | None = None
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else end
        if lines[start].lstrip().startswith("@"):
            pending = start if pending is None else pending
            continue
        blocks.append((pending if pending is not None else start, stop))
        pending = None
    if pending is not None:
        blocks.append((pending, end))
    return blocks


def _class_parts(lines: list[str], kept_functions: list[str] = ()) -> list[tuple[int, int]]:  # type: ignore[assignment]
    """A class (its lines) pruned to its header, non-method statements and the methods that can hold
    RoPE code, as line ranges relative to the class's first line."""
    begin, end = 0, len(lines)
    header_end = begin
    while header_end < end and not lines[header_end].startswith("class "):
        header_end += 1
    while header_end < end and not lines[header_end].split("#", 1)[0].rstrip().endswith(":"):
        header_end += 1  # a header over several lines
    body_start = header_end + 1
    indent = None
    for i in range(body_start, end):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            break
    if not indent or header_end >= end:
        return [(begin, end)]
    starts = _starts(lines, indent, body_start, end)
    if not starts:
        return [(begin, end)]
    # The header alone (decorators and ``class ...:``): a pruned class needs no docstring or attributes.
    kept = [(begin, header_end + 1)]
    any_method = False
    skipped: list[tuple[int, int, str]] = []
    dtype_takers: list[str] = []
    for start, stop in _blocks(lines, starts, end):
        first = lines[start:stop]
        head = next((ln for ln in first if not ln.lstrip().startswith("@")), "")
        name = _DEF_NAME.match(head)
        if name is None:
            continue
        text = "".join(first)
        # Inside a class, any method that speaks of frequencies or phases may carry them between
        # methods (``self._precompute_freqs_cis()``), so the vocabulary alone keeps it.
        if name.group(1) in _KEEP_METHODS or (_rotary_vocabulary(text) and "return" in text) \
                or any(call in text for call in kept_functions) or _interesting(text, head, stop - start, method=True) \
                or ("**" in text and _STATE_POWER.search(text) is not None) \
                or (_ROTARY_STATE.search(text) is not None and any(token in text for token in _TRIG_LITERALS)):
            kept.append((start, stop))
            any_method = any_method or name.group(1) not in _KEEP_METHODS
            if _takes_dtype(text) or _returns_cast_tables(text):
                dtype_takers.append(f"self.{name.group(1)}(")
        else:
            skipped.append((start, stop, text))
    # A method a kept one calls that builds a range (``seq = self.get_seq_pos(n)``) may build the positions.
    if any_method:
        kept_text = "".join("".join(lines[a:b]) for a, b in kept)
        for start, stop, text in list(skipped):
            name = _DEF_NAME.match(next((ln for ln in lines[start:stop] if not ln.lstrip().startswith("@")), ""))
            short_cast = stop - start <= SMALL_HELPER_MAX_LINES and (".to(" in text or "type_as(" in text)
            counts = "cumsum(" in text or "new_ones(" in text or "ones_like(" in text
            if name and ("arange(" in text or "linspace(" in text or short_cast or counts) \
                    and f"self.{name.group(1)}(" in kept_text:
                # A short method that casts what it hands back (``self.embed_positions.to(position_ids)``) too.
                kept.append((start, stop))
                skipped.remove((start, stop, text))
                if _takes_dtype(text):
                    dtype_takers.append(f"self.{name.group(1)}(")
    # A method that registers state a kept one reads (``self.long_factor`` scaling the frequencies in forward):
    # whether module casts reach that state is decided where it is registered.
    if any_method and skipped:
        kept_text = "".join("".join(lines[a:b]) for a, b in kept)
        for start, stop, text in list(skipped):
            if any(_STATE_NAME.search(name) and f"self.{name}" in kept_text
                   for name in (m.group(1) or m.group(2) for m in _REGISTERED.finditer(text))):
                kept.append((start, stop))
                skipped.remove((start, stop, text))
    # A method that registers what a kept one builds (litgpt's ``max_seq_length`` setter:
    # ``cos, sin = self.rope_cache()`` then ``self.register_buffer("cos", cos, ...)``): module casts reach those tables.
    if any_method and skipped:
        builders = [f"self.{m.group(1)}(" for a, b in kept for m in [_DEF_NAME.match(
            next((ln for ln in lines[a:b] if not ln.lstrip().startswith("@")), ""))] if m and a > 0]
        for start, stop, text in list(skipped):
            if builders and any(call in text for call in builders) and any(
                    _TABLE_NAME.search(m.group(1) or m.group(2)) for m in _REGISTERED.finditer(text)):
                kept.append((start, stop))
                skipped.remove((start, stop, text))
    # A method that casts registered state (``self.cos_sin_cache = self.cos_sin_cache.to(positions)`` in vLLM's
    # ``forward_native``): module casts are not the only ones that reach a cached table.
    if any_method and skipped:
        kept_text = "".join("".join(lines[a:b]) for a, b in kept)
        registered = {m.group(1) or m.group(2) for m in _REGISTERED.finditer(kept_text)}
        casts = tuple(f"self.{name}.{verb}(" for name in registered for verb in ("to", "type", "type_as"))
        for start, stop, text in list(skipped):
            if casts and any(cast in text for cast in casts):
                kept.append((start, stop))
                skipped.remove((start, stop, text))
    # A method that hands a dtype to a kept one (``self.get_seq_pos(n, dtype=q.dtype)``) decides what
    # that one builds: the analysis and the fix at its calls must see every such call.
    if any_method and dtype_takers:
        kept.extend((start, stop) for start, stop, text in skipped if any(call in text for call in dtype_takers))
    kept.sort()
    return kept if any_method else []


# Registered state whose name says it can shape frequencies (``long_factor``, ``omega``); a causal ``bias``
# buffer that an attention ``forward`` reads is no reason to parse its ``__init__``.
_STATE_NAME = re.compile(r"factor|scale|freq|theta|omega|band|rope|rotary|angle|phase|inv")
# Registered state named as cos/sin tables (``cos``, ``sin_cached``, ``_cos_table``): not a fixed sinusoidal ``weight``.
_TABLE_NAME = re.compile(r"(?:^|_)(?:cos|sin)(?:_|$)")
_REGISTERED = re.compile(r"register_buffer\(\s*[\"'](\w+)[\"']|self\.(?=\w+\s*=\s*(?:[\w.]+\.)?(?:Parameter|Buffer)\()(\w+)")


_FORWARD_FIRST = re.compile(r"def forward\(\s*self\s*,\s*(\w+)")
_IDS_OR_POSITIONS = re.compile(r"\w*_ids|idx|tokens|positions?|pos|seq_len|max_seq_len|t")


# ``like = positions if like is None else like``, ``if dtype is None: dtype = position_ids.dtype``,
# ``dtype = dtype or positions.dtype``: an optional argument that falls back to another one (the positions, or
# their dtype) when a caller leaves it out.
_FALLBACK = re.compile(r"\b(\w+)\s*=\s*([\w.]+)\s+if\s+\1\s+is\s+None\s+else\s+\1\b"
                       r"|\bif\s+(\w+)\s+is\s+None\s*:\s*\3\s*=\s*([\w.]+)\s*$"
                       r"|\b(\w+)\s*=\s*\5\s+or\s+[\w.]+\.dtype\b", re.MULTILINE)


def _takes_activation_first(block: str) -> bool:
    """The class's ``forward`` takes something other than ids or positions first (``x``, ``hidden_states``),
    or its tables take a dtype that, left out, falls back to another argument's (the positions')."""
    m = _FORWARD_FIRST.search(block)
    if m is not None and not _IDS_OR_POSITIONS.fullmatch(m.group(1)):
        return True
    for f in _FALLBACK.finditer(block):
        name, fallback = f.group(1) or f.group(3) or f.group(5), f.group(2) or f.group(4) or ".dtype"
        if fallback.endswith(".dtype") or f"{name}.dtype" in block:
            return True
    return False


_NESTED_DEF = re.compile(r"^[ \t]+(?:async[ \t]+)?def[ \t]", re.MULTILINE)
_HELD = re.compile(r"self\.(\w+)\s*=\s*(?:[\w.]+\.)?(\w+)\(")
# A range built in a dtype that is not an integer or float32 one (``dtype=inputs_embeds.dtype``, ``dtype=self.dtype``).
_RANGE_IN_A_DTYPE = re.compile(r"\barange\([^)]*\bdtype\s*=\s*(?!torch\.(?:long|int64|int32|int|float32|float)\b)[\w.]"
                               # ``torch.arange(a, b).to(inputs_embeds)``: a device move that takes the dtype too
                               r"|\barange\([^)\n]*\)\.(?:to|type_as)\(\s*(?!device\b)[a-z_]\w*\s*\)")
_EMBEDDING_HELD = re.compile(r"self\.(\w+)\s*=\s*(?:nn\.|torch\.nn\.)?Embedding\(")
_HELD_LIST = re.compile(r"self\.(\w+)\s*=\s*(?:nn\.|torch\.nn\.)?Module(?:List|Dict)\(")
_REGISTRY_HELD = re.compile(r"self\.(\w+)\s*=\s*([A-Z_][A-Z0-9_]*)\[[^\]\n]*\]\(")
# Casts to or of ids and positions in a class that holds a rotary: where glue code can break its tables.
_GLUE_CAST = re.compile(r"\.(?:to|type_as)\(\s*(?:dtype\s*=\s*)?(?:\w*_ids|pos|positions|idx)(?:\.dtype)?\s*\)"
                        r"|\b(?:position_ids|positions|pos_ids)\.(?:to|type_as|type|half|bfloat16)\(")
# ``cos.type_as(position_ids)``, ``sin[position_ids].unsqueeze(1).to(position_ids.dtype)``: tables cast to the ids'
# integer dtype, in whatever class or function holds the cast (a decoder layer, an attention's helper). Found from
# the cast (a literal start the regex engine skips to), then the receiver on its line is checked.
_CAST_TO_IDS = re.compile(rb"\.(?:to|type_as|type)\(\s*(?:dtype\s*=\s*)?(?:\w*_ids|pos|positions|idx)(?:\.dtype)?\s*\)")
_TABLE_RECEIVER = re.compile(rb"\b(?:cos|sin)\w*(?:\[[^\]\n]*\])?(?:\.\w+\([^()\n]*\))*$")


def _tables_cast_to_ids(text: bytes) -> list[tuple[int, str]]:
    """(offset, text) of every such cast in the file, in order (one pass; the blocks holding them pick theirs)."""
    found = []
    for m in _CAST_TO_IDS.finditer(text):
        receiver = _TABLE_RECEIVER.search(text, text.rfind(b"\n", 0, m.start()) + 1, m.start())
        if receiver is not None:
            found.append((m.start(), text[receiver.start():m.end()].decode("utf-8", "surrogatepass")))
    return found


# ``ref = input_ids if input_ids is not None else inputs_embeds``: ids under another name.
_IDS_ASSIGNED = re.compile(r"(?<![=!<>])=[ \t]*(?:idx|tokens|\w*_ids)\b(?![ \t]*[.\[(=])")
_NAME_BEFORE = re.compile(r"(?<![\w.])\w+[ \t]*$")
_IDS_CALL = re.compile(r"self\.(\w+)\(\s*(?:idx|tokens|input_idx|token_idx|\w*_ids|positions)\s*(?:[,)]|if\b)")


def _token_ids_handed(text: bytes, block: _Block, takers: list[bytes], glue: tuple[str, ...] = ()) -> list[str]:
    """In a class that holds a kept rotary class whose ``forward`` takes activations first
    (``self.rope = RoPE(...)``, or ``ROPE_CLASSES[kind](...)`` from a registry naming one: ``takers``) and
    calls it with token or position ids (``self.rope(idx)``), the text of that assignment and of that call: the
    methods holding them show what the rotary's ``x`` argument receives. Empty for the usual
    ``self.rotary_emb(hidden_states)``."""
    if not any(text.find(name, block.begin, block.end) != -1 for name in takers):
        return []  # the common case, decided without decoding the class
    segment = block.text(text)
    held = {m.group(1): m.group(0) for m in _HELD.finditer(segment) if f"{m.group(2)}(".encode() in takers}
    held |= {m.group(1): m.group(0) for m in _REGISTRY_HELD.finditer(segment) if f"{m.group(2)}[".encode() in takers}
    found = []
    # ``ref = input_ids if input_ids is not None else inputs_embeds`` then ``self.rotary_emb(ref, position_ids)``.
    aliases = set()
    for m in _IDS_ASSIGNED.finditer(segment) if held else ():  # from the ``=`` (a literal start), then the name
        name = _NAME_BEFORE.search(segment, max(0, m.start() - 80), m.start())
        if name is not None:
            aliases.add(name.group(0).strip())
    for alias in aliases:
        for call in re.finditer(rf"self\.(\w+)\(\s*{alias}\s*[,)]", segment):
            if call.group(1) in held:
                found += [held[call.group(1)], call.group(0)]
    for call in _IDS_CALL.finditer(segment):
        if call.group(1) in held:
            found += [held[call.group(1)], call.group(0)]
            # ``positions = self.time_positions(timestamps)`` first: the method says what the positions are.
            found += [f"def {m}(" for m in re.findall(r"\bpositions\s*=\s*self\.(\w+)\(", segment)]
    for listed in _HELD_LIST.finditer(segment):
        # ``self.rotaries = nn.ModuleList(LayerRope(...) for ...)``; ``for i, rope in enumerate(self.rotaries):
        # ... rope(position_ids, position_ids)``.
        if not any(name.decode() in segment[listed.end():listed.end() + 400] for name in takers):
            continue
        for loop in re.finditer(rf"for\s+(?:\w+\s*,\s*)?(\w+)\s+in\s+(?:enumerate\()?self\.{listed.group(1)}\b", segment):
            call = re.search(rf"\b{loop.group(1)}\(\s*(?:idx|tokens|\w*_ids)\s*[,)]", segment[loop.end():])
            if call is not None:
                found += [listed.group(0), loop.group(0)]
        indexed = re.search(rf"self\.{listed.group(1)}\[[^\]\n]*\]\(\s*(?:idx|tokens|\w*_ids)\s*[,)]", segment)
        if indexed is not None:
            found += [listed.group(0), indexed.group(0)]
    if held and not found and "Embedding(" in segment:
        # Whisper's ``rope = self.rotary(x, n)`` before ``x = self.token_embedding(x)``: the ids under another name.
        embeddings = set(_EMBEDDING_HELD.findall(segment))
        for call in re.finditer(r"self\.(\w+)\(\s*(\w+)\s*[,)]", segment):
            if call.group(1) in held and embeddings and re.search(
                    rf"self\.(?:{'|'.join(embeddings)})\(\s*{call.group(2)}\s*\)", segment):
                found += [held[call.group(1)], call.group(0)]
    glued = [g for g in glue if g in segment] if held and not found else []
    if held and not found and (glued or _GLUE_CAST.search(segment)):
        # ``cos.to(position_ids)``, ``position_ids.to(hidden_states.dtype)`` around the call, or a call of a function
        # that casts like that (``apply_rotary_pos_emb(q, k, cos, sin, position_ids)`` doing ``cos.to(position_ids)``):
        # the methods that call the rotary show what reaches it and what its tables become.
        for call in re.finditer(r"self\.(\w+)\(", segment):
            if call.group(1) in held:
                found += [held[call.group(1)], call.group(0)]
        found += glued
    return found


# ``self.weight = nn.Parameter(torch.zeros(o, i, dtype=torch.int8))``, ``register_buffer("qweight", ..., dtype=torch.int32)``:
# a quantised layer whose weight stays integer through module casts.
_INTEGER_WEIGHT = re.compile(r"(?:self\.(\w*weight)\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\(|register_buffer\(\s*[\"'](\w*weight)[\"'])"
                             r"[^\n]*\bdtype\s*=\s*torch\.u?int(?:8|16|32)\b")


def integer_weights(text: str) -> frozenset[str]:
    """Names of weights some module of this file holds as integer tensors: another module's ``.weight.dtype``
    can then be integer (after quantisation swapped its layers) and is no dtype for tables."""
    # (Quantised weights are int8, or int32/int16 words packing 4-bit values; int64 is for ids.)
    if "torch.int8" not in text and "torch.uint8" not in text and "torch.int32" not in text \
            and "torch.int16" not in text:
        return frozenset()
    found = set()
    for line in text.splitlines():
        if "weight" in line and "dtype" in line:
            found.update(m.group(1) or m.group(2) for m in _INTEGER_WEIGHT.finditer(line))
    return frozenset(found)


_FORWARD_SIGNATURE = re.compile(r"def forward\(\s*self\b([^)]*)\)")


def _forward_takes_dtype(block: str) -> bool:
    """The class's ``forward`` has a ``dtype`` parameter: its holder chooses what its tables are cast to."""
    m = _FORWARD_SIGNATURE.search(block)
    return m is not None and re.search(r"\bdtype\b", m.group(1)) is not None


def _positions_built(text: bytes, block: _Block, rotaries: list[bytes], float_positions: tuple[str, ...] = ()) -> list[str]:
    """In a class holding any kept rotary class, the assignment and the calls of it when the class builds positions
    itself in a way that can round them (``position_ids = (mask.cumsum(-1) - 1) * mask`` over a mask cast to the
    activations, ``torch.arange(n, dtype=inputs_embeds.dtype)``), or reads them from a float buffer of positions
    another module of the file registers (``self.embeddings.position_ids[ids]``: ``float_positions`` names them):
    the rotary's ``forward`` sees them."""
    borrowed = bool(float_positions) and any(
        text.find(b"." + name.encode(), block.begin, block.end) != -1 for name in float_positions)
    cast = text.find(b".dtype)", block.begin, block.end) != -1
    if not borrowed and not cast and text.find(b"cumsum(", block.begin, block.end) == -1 \
            and text.find(b"arange(", block.begin, block.end) == -1:
        return []
    if not any(text.find(name, block.begin, block.end) != -1 for name in rotaries):
        return []
    segment = block.text(text)
    if borrowed:
        borrowed = any(re.search(rf"self\.\w+\.{name}\b", segment) for name in float_positions)
    # ``ids = torch.cat((txt_ids, img_ids)).to(dtype=hidden_states.dtype)``, then ``self.pos_embed(ids)``: ids cast
    # to the activations' dtype on their way to the rotary.
    built = borrowed or "cumsum(" in segment or _RANGE_IN_A_DTYPE.search(segment) is not None \
        or _FLOAT_POSITIONS_BUFFER.search(segment) is not None
    cast_names = {m.group(1) for m in _CAST_ASSIGNED.finditer(segment)} if cast and not built else set()
    if not built and not cast_names:
        return []
    held = {m.group(1): m.group(0) for m in _HELD.finditer(segment) if f"{m.group(2)}(".encode() in rotaries}
    if not built:  # only the cast: kept where one of those names goes into a held rotary
        # ``position_ids = ids_from_mask(mask)`` over a cast ``mask``: what the helper counts from it goes there too.
        cast_names |= {m.group(1) for name in cast_names for m in re.finditer(
            rf"^[ \t]*(\w+)[ \t]*=[ \t]*[\w.]+\([ \t]*{name}[ \t]*\)", segment, re.MULTILINE)}
        held = {attr: assignment for attr, assignment in held.items()
                if any(re.search(rf"self\.{attr}\((?:[^()\n]*,)?\s*{name}\s*[,)]", segment) for name in cast_names)}
    return [part for attr, assignment in held.items() if f"self.{attr}(" in segment
            for part in (assignment, f"self.{attr}(")]


# A name assigned a value cast to another tensor's dtype (``ids = ....to(dtype=hidden_states.dtype)``).
# Or made by a call told that dtype (``img_ids = prepare_latent_image_ids(h, w, device, dtype=hidden.dtype)``).
_CAST_ASSIGNED = re.compile(r"^[ \t]*(\w+)[ \t]*=[^=\n][^\n]*(?:\.to\([ \t]*|[(,][ \t]*)(?:dtype[ \t]*=[ \t]*)?[\w.]+\.dtype"
                            r"[ \t]*\)[ \t]*$", re.MULTILINE)


# ``register_buffer("position_ids", torch.arange(n).float().unsqueeze(0))``, ``torch.arange(n, dtype=torch.float32)``:
# positions a module cast rounds.
_FLOAT_POSITIONS_BUFFER = re.compile(r"register_buffer\(\s*[\"'](\w*position\w*|pos\w*)[\"']\s*,\s*[^\n]*\barange\("
                                     r"(?:[^\n]*\.(?:float|half|bfloat16|to)\(|[^)\n]*\bdtype\s*=\s*torch\."
                                     r"(?:float|half|bfloat16|double))")


# The same, on the file's bytes (no decoding of the whole file).
_FLOAT_POSITIONS_BUFFER_BYTES = re.compile(_FLOAT_POSITIONS_BUFFER.pattern.encode())


def float_position_buffers(text: bytes) -> list[tuple[str, str]]:
    """(name, registering text) of the float buffers of positions the file's modules register."""
    if b"register_buffer(" not in text or b"arange(" not in text:
        return []
    return [(m.group(1).decode(), m.group(0).decode("utf-8", "surrogatepass"))
            for m in _FLOAT_POSITIONS_BUFFER_BYTES.finditer(text)]


_COUNTED_IDS = re.compile(r"\b(?:position_ids|cache_position)\s*=\s*[^\n]*\b(?:cumsum|arange)\("
                          r"|[\"'](?:position_ids|cache_position)[\"']\s*:")
# A mask or range put in a floating dtype the model chooses: ``attention_mask.to(self.dtype)``.
_CAST_TO_A_DTYPE = re.compile(r"\.to\(\s*(?:dtype\s*=\s*)?(?:self\.dtype|[\w.]+\.dtype|torch\.(?:float16|bfloat16|half))\s*\)")


def _ids_counted(text: bytes, block: _Block, rotaries: list[bytes]) -> list[str]:
    """In any class of a file with a kept rotary, a method that counts position ids itself
    (``position_ids = attention_mask.cumsum(-1) - 1`` in ``prepare_inputs_for_generation``): their dtype is the
    count's, which may be the model's."""
    if not rotaries or (text.find(b"cumsum(", block.begin, block.end) == -1
                        and text.find(b"arange(", block.begin, block.end) == -1) \
            or (text.find(b"position_ids", block.begin, block.end) == -1
                and text.find(b"cache_position", block.begin, block.end) == -1):
        return []
    segment = block.text(text)
    found = [m.group(0) for m in _COUNTED_IDS.finditer(segment)]
    if found and _CAST_TO_A_DTYPE.search(segment) is None and _RANGE_IN_A_DTYPE.search(segment) is None \
            and _MASK_LIKE_ACTIVATIONS.search(segment) is None:
        return []  # ids counted from an integer mask or range (the usual ``attention_mask.long().cumsum(-1)``)
    # (and ``__init__``, which sets what ``self.dtype`` they may be counted in; ``forward``, which hands them on)
    return [*found, "def __init__(", "def forward("] if found else []


# ``attention_mask = inputs_embeds.new_ones(b, s)``, ``torch.ones_like(inputs_embeds[..., 0])``: a default mask (or
# ones to count) in the activations' dtype.
_MASK_LIKE_ACTIVATIONS = re.compile(r"\.new_ones\(|ones_like\(\s*(?:inputs?_embeds|hidden_states|x)")


def _holder_chain(text: bytes, blocks: list[_Block], counting: list[_Block], rotaries: list[bytes]) -> set[str]:
    """Classes on the way from one that counts position ids (``counting``) to a rotary class it holds through
    others (``self.layers = nn.ModuleList(Layer(...) ...)``, ``self.attention = Attention(...)``): their ``forward``
    hands the ids down, so the analysis must see them."""
    classes = {b.name: b for b in blocks if b.name and b.head.startswith("class ")}
    targets = {r[:-1].decode() for r in rotaries}
    held = {name: {h for h in re.findall(r"\b([A-Z]\w*)\(", b.text(text)) if h in classes and h != name}
            for name, b in classes.items()}
    on_way: set[str] = set()
    for start in counting:
        # Depth-first over what each class holds: a class is on the way when a rotary is reachable from it.
        reach: dict[str, bool] = {}

        def reaches(name: str, depth: int) -> bool:
            if name in reach:
                return reach[name]
            reach[name] = False  # (cycles)
            found = any(h in targets or (depth < 6 and reaches(h, depth + 1)) for h in held.get(name, ()))
            reach[name] = found
            return found

        if start.name and reaches(start.name, 0):
            on_way |= {name for name, ok in reach.items() if ok}
    return on_way - targets


# ``rotary_emb(position_ids, ...)``: a bare name called with ids; when that name was assigned a chain of held modules
# (``rotary_emb = self.layers[0].self_attn.rotary_emb``), a rotary reached through them is handed ids as activations.
_IDS_ARGUMENT = re.compile(rb"\(\s*(?:idx|tokens|\w*_ids|positions?)\s*[,)]")
_IDENTIFIER_END = re.compile(rb"(?<![\w.])\w+$")


def _chained_id_calls(text: bytes, takers: list[bytes]) -> tuple[list[str], set[str]]:
    """The texts of such aliases (the methods holding them show what the rotary gets) and the attribute names
    the chain goes through: the classes assigning those hold the way there, in their ``__init__``."""
    names = set()
    for m in _IDS_ARGUMENT.finditer(text) if takers else ():
        callee = _IDENTIFIER_END.search(text, max(0, m.start() - 80), m.start())  # ``name(`` but not ``obj.name(``
        if callee is not None:
            names.add(callee.group(0))
    if not names:
        return [], set()
    chain = re.compile(rb"\n[ \t]+(" + b"|".join(re.escape(n) for n in names)
                       + rb")\s*=\s*self((?:\.\w+(?:\[[^\]\n]*\])?)+)\.(\w+)[ \t]*(?=\n)")
    found: list[str] = []
    attrs: set[str] = set()
    for m in chain.finditer(text):
        if re.search(rb"(?<![\w.])" + m.group(1) + rb"\(\s*(?:idx|tokens|\w*_ids|positions?)\s*[,)]",
                     text[m.end():m.end() + 2000]):
            found.append(m.group(0).strip().decode())
            attrs.update(re.findall(r"\.(\w+)", (m.group(2) + b"." + m.group(3)).decode()))
    return found, attrs


def _dtype_handed(text: bytes, block: _Block, takers: list[bytes]) -> list[str]:
    """In a class that holds a kept rotary class whose ``forward`` takes a ``dtype`` (``takers``), the text of
    that assignment and of a call handing it one (``self.rotary_emb(position_ids, dtype=self.q_proj.weight.dtype)``):
    the dtype comes from the holder, which may take it from an integer tensor."""
    if not any(text.find(name, block.begin, block.end) != -1 for name in takers):
        return []
    segment = block.text(text)
    held = {m.group(1): m.group(0) for m in _HELD.finditer(segment) if f"{m.group(2)}(".encode() in takers}
    found = []
    for attr, assignment in held.items():
        for call in re.finditer(rf"self\.{attr}\(", segment):
            depth, end = 1, call.end()
            while depth and end < len(segment) and end - call.end() < 600:
                depth += {"(": 1, ")": -1}.get(segment[end], 0)
                end += 1
            if re.search(r"\bdtype\s*=", segment[call.end():end]):
                found += [assignment, call.group(0)]
                break
    return found


_RETURNED_CAST = re.compile(r"return\b[^\n]*\b(?:cos|sin)\w*(?:\(\))?\.(?:to|type_as|type)\(")
# ``return sin, cos`` (GPT-J's ``sin_cos(position_ids)`` reading a cached table): a fix keeping that table float32
# casts the tables where the class's callers rotate with them.
_RETURNED_TABLES = re.compile(r"^[ \t]*return[ \t]+\(?[ \t]*(?:cos|sin)\w*[ \t]*,[ \t]*(?:cos|sin)\w*[ \t]*\)?[ \t]*$",
                              re.MULTILINE)


def _takes_tables(function: str) -> bool:
    """The function's signature names cos/sin tables (``def apply_rotary_pos_emb(q, k, cos, sin, position_ids)``)."""
    signature = function[:function.find(":", function.find(")"))]
    return re.search(r"\b(?:cos|sin)\w*\b", signature) is not None


def _returns_cast_tables(method: str) -> bool:
    """``return cos.to(dtype), sin.to(dtype)`` (or ``return sin, cos``): the callers in the class receive the
    tables, and a fix that changes their dtype casts them there."""
    return _RETURNED_CAST.search(method) is not None or _RETURNED_TABLES.search(method) is not None


def _takes_dtype(method: str) -> bool:
    """The method's signature (up to the ``:`` after its parameters) names a dtype."""
    return "dtype" in method[:method.find(":", method.find(")"))]


@dataclass
class _Block:
    begin: int  # offsets into the file's UTF-8 bytes
    end: int
    line: int  # 1-based first line
    lines: int
    anchored: bool = False
    head: str = ""
    name: str | None = None
    interesting: bool = False
    # Kept for calling a rotary-named method of a kept class: its ``__init__`` says what ``self.<attr>`` holds.
    calls_rotary_method: bool = False
    decoded: str | None = None  # the block's text, once some check has needed it

    def text(self, source: bytes) -> str:
        # Several holder checks read the same class: decode it once.
        if self.decoded is None:
            self.decoded = source[self.begin:self.end].decode("utf-8", "surrogatepass")
        return self.decoded


def _split_lines(text: str) -> list[str]:
    """Lines with their ends, split at ``\\n`` only (as the parser counts lines; not at form feeds)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _top_blocks(text: bytes) -> list[_Block]:
    """Top-level statements as offset ranges; a decorator run joins the definition below it."""
    # A clause (``else:``, ``except ...:``) continues the statement above it.
    offsets = [m.end() for m in _TOP_START.finditer(text) if not _CLAUSE.match(text, m.end())]
    if not offsets and not text.strip():
        return []
    offsets.insert(0, 0)
    offsets.append(len(text))
    blocks: list[_Block] = []
    line = 1
    pending: tuple[int, int] | None = None
    for a, b in zip(offsets, offsets[1:]):
        count = text.count(b"\n", a, b)
        if text.startswith(b"@", a):
            pending = pending or (a, line)
        else:
            begin, first = pending or (a, line)
            blocks.append(_Block(begin, b, first, line + count - first))
            pending = None
        line += count
    if pending is not None:
        blocks.append(_Block(pending[0], len(text), pending[1], line - pending[1]))
    return blocks


def _anchor_offsets(text: bytes) -> list[int]:
    found = []
    find = text.find
    for token in _ANCHORS:
        at = find(token)
        while at != -1:
            found.append(at)
            at = find(token, at + 1)
    found.sort()
    return found


_DTYPE_CONSTANT = re.compile(rb"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*torch\.(?:bfloat16|float16|half|float32|float|float64|double)\s*$",
                             re.MULTILINE)
_METHOD_DEF = re.compile(rb"^[ \t]+(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


def _with_method_callers(text: bytes, blocks: list[_Block]) -> list[str]:
    """Classes that call a rotary-named method of a kept class (``self.rope_params.create_rope_const_params(...)``
    on a config object whose method calls ``Utils.create_sinusoidal_positions(...)``) become interesting too,
    transitively: the dtype they pass decides what that method builds. Returns the calls, as ``.name(``."""
    classes = [b for b in blocks if b.head.startswith("class ")]
    found: list[str] = []
    if not any(b.interesting for b in classes):
        return found
    done: set[bytes] = set()
    changed = True
    while changed:
        changed = False
        defs = {m.group(1): m for b in classes if b.interesting for m in _METHOD_DEF.finditer(text, b.begin, b.end)}
        methods = set(defs) - done
        calls = [b"." + m + b"(" for m in methods if _ROTARY_NAME.search(m.decode()) or _ANGLES_METHOD.fullmatch(m)]
        # ``self.rotary_pos_emb.forward_impl(n, d, dtype=position_ids.dtype, ...)``: a method that takes a dtype
        # builds its tables in whatever dtype a caller hands it.
        typed = [b"." + m + b"(" for m in methods if not _ROTARY_NAME.search(m.decode()) and not m.startswith(b"__")
                 and _takes_dtype(text[defs[m].end():text.find(b":\n", defs[m].end()) + 1].decode("utf-8", "replace"))]
        done |= methods
        for b in classes:
            if b.interesting:
                continue
            hits = [call for call in calls if text.find(call, b.begin, b.end) != -1]
            if typed and text.find(b"dtype", b.begin, b.end) != -1:
                hits += [call for call in typed if text.find(call, b.begin, b.end) != -1]
            if hits:
                b.interesting = b.calls_rotary_method = changed = True
                found.extend(call.decode() for call in hits if call.decode() not in found)
    return found


def _code_lines(text: bytes, block: _Block) -> int:
    """The block's lines without the blank lines that separate it from the next one."""
    if block.lines <= SMALL_HELPER_MAX_LINES or block.lines > 4 * SMALL_HELPER_MAX_LINES:
        return block.lines  # (a long block stays long: no need to look at its end)
    tail = text[max(block.begin, block.end - 512):block.end]
    return block.lines - tail[len(tail.rstrip()):].count(b"\n") + 1


def _with_small_helpers(text: bytes, blocks: list[_Block],
                        kept: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``kept`` plus the short top-level functions it calls, transitively (``default(val, d)``,
    ``exists(val)``): without them the analysis cannot follow a dtype argument through
    ``dtype = default(dtype, self.freqs.dtype)``. A few lines each, so parsing them is cheap."""
    taken = {begin for begin, _, _ in kept}
    # Any size when the name says rotary (``apply_interleaved_mrope(freqs, section, out)`` writes the phase into
    # a buffer its caller allocated, and the analysis must see that) or it makes ranges (``get_meshgrid_nd``:
    # the integer grid whose dtype a table builder falls back to).
    small = [b for b in blocks if b.name and b.begin not in taken and b.head.startswith(("def ", "async def "))
             and (_code_lines(text, b) <= SMALL_HELPER_MAX_LINES or _ROTARY_NAME.search(b.name) or b.anchored)]
    if not small:
        return kept
    added: list[tuple[int, int, int]] = []
    searched = b"".join(text[begin:end] for begin, end, _ in kept)
    while searched and small:
        # One pass over the text for all the names (a search per name cost more than the parse saves).
        names_alt = b"|".join(re.escape(b.name.encode()) for b in small)
        # Called, or mapped (``vmap(vmap(_angles, in_dims=...))`` runs ``_angles``).
        mapped = rb"|vmap\(\s*(" + names_alt + rb")\b" if b"vmap(" in searched else rb"|(?!)()"
        calls = re.compile(rb"(?<![\w.])(" + names_alt + rb")\(" + mapped)
        names = {(m.group(1) or m.group(2)).decode() for m in calls.finditer(searched)}
        found = [b for b in small if b.name in names]
        small = [b for b in small if b.name not in names]
        added.extend((b.begin, b.end, b.line) for b in found)
        searched = b"".join(text[b.begin:b.end] for b in found)
    return sorted(kept + added) if added else kept


_REGISTRY_CALL = re.compile(rb"self\.\w+\s*=\s*([A-Z_][A-Z0-9_]*)\[[^\]\n]*\]\(")
_REGISTRY_DICT = re.compile(rb"([A-Z_][A-Z0-9_]*)\s*(?::[^=\n]*)?=\s*(?:\{|dict\()")
_REGISTRY_VALUE = re.compile(rb"(?::|\w=)\s*([A-Za-z_]\w*)\s*(?=[,})\n])")
# ``self.rope_init_fn = ROPE_INIT_FUNCTIONS[rope_type]`` or ``ROPE_INIT_FUNCTIONS[kind](config, ...)``: a dict of
# functions, called later through what was picked (or each of them: ``for name, fn in _BUILDERS.items()``).
_FUNCTION_PICK = re.compile(rb"(?:=\s*|[^\w.])([A-Z_][A-Z0-9_]*)(?:\[[^\]\n]*\]\s*(?:\(|$)|\.get\(|\.(?:items|values)\(\))",
                            re.MULTILINE)


def _registries_of(text: bytes, blocks: list[_Block], takers: list[bytes]) -> list[bytes]:
    """``b"ROPE_CLASSES["`` for each module-level dict of classes that names one of ``takers`` (``b"Name("``) or a
    subclass of one (``class Llama(Mixin, Base): pass``)."""
    names = {t[:-1].decode() for t in takers}
    classes = [(b.name, b.head) for b in blocks if b.name and b.head.startswith("class ")]
    changed = True
    while changed:
        changed = False
        for name, head in classes:
            if name not in names and set(re.findall(r"\w+", head[head.find("(") + 1:])) & names:
                names.add(name)
                changed = True
    wanted = set(_REGISTRY_CALL.findall(text))
    found = []
    for b in blocks:
        m = _REGISTRY_DICT.match(text, b.begin, b.end)
        if m is not None and m.group(1) in wanted \
                and any(v.decode() in names for v in _REGISTRY_VALUE.findall(text, b.begin, b.end)):
            found.append(m.group(1) + b"[")
    return found


def _with_registries(text: bytes, blocks: list[_Block],
                     kept: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``kept`` plus, for ``self.rotary_emb = ROPE_CLASSES[rope_type](...)`` in kept code, the module-level dict
    it picks from and the classes of this file it names (often thin subclasses: ``class Llama(Mixin, Base):
    pass``): what ``self.rotary_emb(...)`` runs, and so what the holder hands it, depends on them."""
    searched = b"".join(text[begin:end] for begin, end, _ in kept)
    names = set(_REGISTRY_CALL.findall(searched))
    # A dict of functions is kept only for the functions already kept: what its calls hand them decides their dtype.
    picked = set(_FUNCTION_PICK.findall(searched)) - names
    if not names and not picked:
        return kept
    taken = {begin for begin, _, _ in kept}
    classes = {b.name: b for b in blocks if b.name and b.head.startswith("class ")}
    functions = {b.name: b for b in blocks if b.name and not b.head.startswith("class ")}
    added: list[tuple[int, int, int]] = []
    for b in blocks:
        m = _REGISTRY_DICT.match(text, b.begin, b.end)
        if b.begin in taken or m is None or m.group(1) not in names | picked:
            continue
        if m.group(1) not in names:
            # A dict of functions naming a kept one: what its calls hand to each of them decides their dtype, and a
            # variant handing its arguments on to a kept builder (``_linear(...)`` calling ``_default(...)``) too.
            values = [functions[v.decode()] for v in _REGISTRY_VALUE.findall(text, b.begin, b.end)
                      if v.decode() in functions]
            # (An empty dict that kept code fills, ``_ROPE_FNS[name] = fn`` in a registering decorator, names
            # the functions that decorator wraps.)
            filled = not values and re.search(rb"(?<![\w.])" + re.escape(m.group(1)) + rb"\[[^\]\n]*\]\s*=(?!=)",
                                              searched) is not None
            if filled or any(f.begin in taken for f in values):
                added.append((b.begin, b.end, b.line))
                for f in values:
                    if f.begin not in taken:
                        taken.add(f.begin)
                        added.append((f.begin, f.end, f.line))
            continue
        added.append((b.begin, b.end, b.line))
        for value in _REGISTRY_VALUE.findall(text, b.begin, b.end):
            cls = classes.get(value.decode())
            if cls is not None and cls.begin not in taken:
                taken.add(cls.begin)
                added.append((cls.begin, cls.end, cls.line))
    return sorted(kept + added) if added else kept


def _with_keyword_constants(text: bytes, blocks: list[_Block],
                            kept: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``kept`` plus the module-level dicts it unpacks as keyword arguments (``torch.arange(n, **_FP32)``
    with ``_FP32 = {"dtype": torch.float32}``): without them a dtype the call passes is invisible."""
    searched = b"".join(text[begin:end] for begin, end, _ in kept)
    unpacked = set(re.findall(rb"\*\*([A-Za-z_]\w*)", searched))
    if not unpacked and b"autocast" not in text and _DTYPE_CONSTANT.search(text) is None:
        return kept
    taken = {begin for begin, _, _ in kept}
    added = []
    for b in blocks:
        if b.begin not in taken and b.lines <= SMALL_HELPER_MAX_LINES:
            block = text[b.begin:b.end]
            m = re.match(rb"([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*(\{|dict\(|(?:functools\.)?partial\()", block)
            name = m.group(1) if m is not None else b""
            dtype = _DTYPE_CONSTANT.match(block)
            if dtype is not None and re.search(rb"(?<![\w.])" + re.escape(dtype.group(1)) + rb"\b", searched):
                # ``DTYPE = torch.bfloat16`` at module level, read as ``dtype=DTYPE`` by kept code.
                added.append((b.begin, b.end, b.line))
                continue
            if m is None:
                continue
            if (m.group(2) in (b"{", b"dict(") and name in unpacked) or (
                    b"autocast" in block and re.search(rb"(?<![\w.])" + re.escape(name) + rb"\(", searched)):
                # ``_fp32 = partial(torch.autocast, enabled=False)`` opens the regions ``with _fp32(...)`` guards.
                added.append((b.begin, b.end, b.line))
    return sorted(kept + added) if added else kept


_BASES = re.compile(r"\(([^)]*)\)")


def _overriding_subclasses(text: bytes, blocks: list[_Block]) -> dict[int, list[str]]:
    """Classes deriving from a kept class of this file that override a method it calls on ``self``
    (``Llama3Rotary.compute_inv_freq``, run by the inherited ``forward``): block offset -> ``"def name("`` of
    each override. What an override reads decides the frequencies the inherited code uses."""
    kept = {b.name: b for b in blocks if b.name and b.interesting and b.head.startswith("class ")}
    found: dict[int, list[str]] = {}
    for b in blocks:
        if not b.name or b.name in kept or not b.head.startswith("class "):
            continue
        bases = _BASES.search(b.head)
        parents = [p for n in (re.findall(r"\w+", bases.group(1)) if bases else ()) if (p := kept.get(n))]
        if not parents:
            continue
        own = set(_METHOD_DEF.findall(text, b.begin, b.end))
        called = {name for p in parents for name in own
                  if re.search(rb"self\." + name + rb"\(", text[p.begin:p.end]) and name != b"__init__"}
        if called:
            found[b.begin] = [f"def {name.decode()}(" for name in sorted(called)]
            kept[b.name] = b
    return found


def select(source: str, data: bytes | None = None) -> Selection | None:
    """The segments worth parsing, or None when nothing in the file can hold RoPE code. ``data``: the
    file's UTF-8 bytes when the caller read them (``source`` encoded, spared the encoding)."""
    text = data if data is not None else source.encode("utf-8", "surrogatepass")
    blocks = _top_blocks(text)
    if not blocks:
        return None
    anchors = _anchor_offsets(text)
    i = 0
    for block in blocks:
        while i < len(anchors) and anchors[i] < block.begin:
            i += 1
        block.anchored = i < len(anchors) and anchors[i] < block.end
    for block in blocks:
        if text.startswith((b"import ", b"from "), block.begin):
            continue  # aliases come from the text scan; fixes insert imports by offset
        head = _HEAD.search(text, block.begin, block.end)
        start = head.start() if head is not None else block.begin
        line_end = text.find(b"\n", start, block.end)
        block.head = text[start:line_end if line_end != -1 else block.end].decode("utf-8", "surrogatepass")
        if head is not None:
            name = _DEF_NAME.match(block.head)
            block.name = name.group(1) if name else None
        if block.anchored:
            block.interesting = _interesting(block.text(text), block.head, block.lines)
    # Functions that can hand rotary values to a caller: kept ones that speak of frequencies (by name
    # or vocabulary), and, transitively, functions that call those.
    functions = {b.name: b for b in blocks if b.name is not None and not b.head.startswith("class ")}
    strong = {name for name, b in functions.items()
              if b.interesting and (_ROTARY_NAME.search(name) or _rotary_vocabulary(b.text(text)))}
    changed = bool(strong)
    while changed:
        changed = False
        for name, b in functions.items():
            if name not in strong:
                segment = b.text(text)
                if any(f"{s}(" in segment for s in strong) \
                        and (_ROTARY_NAME.search(name) or _rotary_vocabulary(segment)):
                    strong.add(name)
                    changed = True
    kept_functions = [f"{name}(" for name in strong]
    # Kept functions that hand back a closure (``def make_rotary(dim): def rope(pos): ...; return rope``): a class
    # holding one (``self._rope = make_rotary(d)``) keeps the methods that call it.
    factories = {name for name in strong if _NESTED_DEF.search(functions[name].text(text)) is not None}
    # ``.create_rope_const_params(``: rotary-named methods of kept classes; a class calling one keeps that method.
    kept_functions += _with_method_callers(text, blocks)
    # Kept rotary classes whose ``forward`` takes activations first, as ``Name(``: a class holding one may hand
    # it ids by mistake.
    takers = [f"{b.name}(".encode() for b in blocks if b.name and b.interesting and b.head.startswith("class ")
              and _takes_activation_first(b.text(text))]
    if takers and _REGISTRY_CALL.search(text):
        takers += _registries_of(text, blocks, takers)
    if takers:
        # ``def gen_rotary_embedding(cfg): return LlamaRotaryEmbedding(...)``: a holder builds the taker through it.
        takers += [f"{name}(".encode() for name, b in functions.items() if b.lines <= WRAPPER_MAX_LINES
                   and any(re.search(rb"\breturn\s+" + re.escape(t), text[b.begin:b.end]) for t in takers)]
    # Functions that cast what they are handed to the ids (``cos.to(position_ids)`` in ``apply_rotary_pos_emb``).
    glue = tuple(f"{name}(" for name, b in functions.items() if _takes_tables(b.text(text))
                 and _GLUE_CAST.search(b.text(text))) if takers else ()
    dtype_takers = [f"{b.name}(".encode() for b in blocks if b.name and b.interesting and b.head.startswith("class ")
                    and _forward_takes_dtype(b.text(text))]
    # Rotary classes: kept ones, and rotary-named ones that call a kept function (``FluxPosEmbed.forward`` calling
    # ``get_1d_rotary_pos_embed``, with no anchor of its own).
    rotaries = [f"{b.name}(".encode() for b in blocks if b.name and b.head.startswith("class ") and (
        b.interesting or (_ROTARY_NAME.search(b.name) is not None and kept_functions
                          and any(call in b.text(text) for call in kept_functions)))]
    aliases, chain = _chained_id_calls(text, takers)
    table_casts = _tables_cast_to_ids(text)
    # Classes that count position ids in a dtype that can round them (what each keeps, found once), and those on the
    # way to the rotary they hold.
    counted_ids = {b.begin: found for b in blocks if rotaries and b.name and b.head.startswith("class ")
                   and (found := _ids_counted(text, b, rotaries))}
    counting = [b for b in blocks if b.begin in counted_ids]
    chain_classes = _holder_chain(text, blocks, counting, rotaries) if counting else set()
    # Float buffers of positions a rotary holder reads through another module (``self.embeddings.position_ids``):
    # the registering class keeps the method registering them, where module casts are decided.
    float_positions = float_position_buffers(text) if rotaries else []
    borrowed_names = tuple(name for name, _ in float_positions if re.search(
        rb"self\.\w+\." + name.encode() + rb"\b", text) is not None)
    registering = [code for name, code in float_positions if name in borrowed_names]
    overriders = _overriding_subclasses(text, blocks)
    kept: list[tuple[int, int, int]] = []  # (begin offset, end offset, first line)
    all_kept = True
    for block in blocks:
        if not block.head or text.startswith((b"import ", b"from "), block.begin):
            all_kept = False
            continue
        interesting = block.interesting or (block.name is not None and block.name in strong)
        is_class = block.head.startswith("class ")
        calls = kept_functions
        if is_class and not interesting and kept_functions:
            segment = block.text(text)
            interesting = any(call in segment for call in kept_functions)
        if block.calls_rotary_method:
            calls = [*calls, "def __init__("]
        if is_class and interesting and factories:
            held = [f"self.{m.group(1)}(" for m in _HELD.finditer(block.text(text)) if m.group(2) in factories]
            calls = [*calls, *held] if held else calls
        if is_class:  # kept or not, a class that hands ids to a rotary keeps the methods that do it
            holder = _token_ids_handed(text, block, takers, glue) or _dtype_handed(text, block, dtype_takers) \
                or _positions_built(text, block, rotaries, borrowed_names) or counted_ids.get(block.begin, [])
            if aliases:
                segment = block.text(text)
                holder = [*holder, *(a for a in aliases if a in segment)]
                if any(f"self.{attr} =" in segment for attr in chain):
                    holder.append("def __init__(")  # a module on the way to the rotary
            if block.name in chain_classes:
                holder = [*holder, "def forward(", "def __init__("]
            if holder:
                interesting, calls = True, [*kept_functions, *holder]
        if not interesting and block.begin in overriders:
            interesting, calls = True, [*calls, *overriders[block.begin]]
        if not interesting and registering and is_class:
            segment = block.text(text)
            found = [code for code in registering if code in segment]
            if found:
                interesting, calls = True, [*calls, *found]
        if not interesting and table_casts:
            cast = next((code for at, code in table_casts if block.begin <= at < block.end), None)
            if cast is not None:
                interesting, calls = True, [*calls, cast]
        if not interesting:
            all_kept = False
            continue
        if is_class and not (block.interesting and block.name and _ROTARY_NAME.search(block.name)
                             and block.lines < CLASS_PRUNE_MIN_LINES):
            lines = _split_lines(block.text(text))
            # The method building a kept rotary class (``self.rotary = RotaryPhase(...)`` in ``__init__``, on a
            # branch): what ``self.rotary(...)`` returns in the kept methods is read from there.
            parts = _class_parts(lines, [*calls, *(r.decode() for r in rotaries if r.decode() != f"{block.name}(")])
            if parts != [(0, len(lines))]:
                all_kept = False
            # Line ranges back to offsets: the class's lines are consecutive in the text, split at the
            # same ``\n`` in bytes as in text.
            bounds = [block.begin]
            for ln in text[block.begin:block.end].split(b"\n"):
                bounds.append(bounds[-1] + len(ln) + 1)
            bounds[-1] = block.end
            kept.extend((bounds[a], bounds[b], block.line + a) for a, b in parts)
        else:
            kept.append((block.begin, block.end, block.line))
    if not kept:
        return None
    if all_kept:
        return whole(source)
    kept = _with_small_helpers(text, blocks, kept)
    kept = _with_registries(text, blocks, kept)
    kept = _with_keyword_constants(text, blocks, kept)
    parts_text: list[str] = []
    chunks: list[Chunk] = []
    synthetic = 1
    for begin, end, line in kept:
        body = text[begin:end].decode("utf-8", "surrogatepass")
        count = body.count("\n")
        if not body.endswith("\n"):
            body += "\n"
            count += 1
        parts_text.append(body)
        chunks.append(Chunk(line, synthetic, count))
        synthetic += count
    return Selection("".join(parts_text), tuple(chunks), False)
