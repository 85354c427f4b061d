"""``--format sarif``: SARIF 2.1.0, for code-scanning dashboards."""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ..catalogue import CATALOGUE as ALL_RULES
from ..diagnostics import Diagnostic, FileError


def render(diagnostics: list[Diagnostic], errors: list[FileError]) -> str:
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "helpUri": f"https://pypi.org/project/ropelint/#{rule.code.lower()}",
            "defaultConfiguration": {"level": "error" if rule.default_enabled else "none"},
        }
        for rule in ALL_RULES
    ]
    index = {rule.code: i for i, rule in enumerate(ALL_RULES)}
    results = [
        {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": "error",
            "message": {"text": d.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": Path(d.path).as_posix()},
                    "region": {"startLine": d.line, "startColumn": d.column,
                               "endLine": d.end_line, "endColumn": d.end_column},
                },
                "logicalLocations": [{"fullyQualifiedName": d.symbol}] if d.symbol else [],
            }],
        }
        for d in diagnostics
    ]
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": Path(e.path).as_posix()},
                                                "region": {"startLine": e.line, "startColumn": e.column}}}],
        }
        for e in errors
    ]
    run = {
        "tool": {"driver": {"name": "ropelint", "version": __version__, "informationUri": "https://pypi.org/project/ropelint/",
                            "rules": rules}},
        "results": results,
        "invocations": [{"executionSuccessful": not errors, "toolExecutionNotifications": notifications}],
    }
    doc = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(doc, indent=2)
