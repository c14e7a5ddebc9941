#!/usr/bin/env python3
"""Render chat-template cases the way Hugging Face transformers' apply_chat_template(tokenize=False) does.

The reference for our TypeScript renderer (src/model/chat-template.ts): transformers compiles a chat
template with Python jinja2 in an ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
with the loopcontrols extension, replaces the `tojson` filter by json.dumps(ensure_ascii=False, ...),
adds the globals raise_exception and strftime_now, and renders with messages, tools,
add_generation_prompt and every other keyword argument (e.g. enable_thinking) as template variables.

Usage:
    python3 scripts/hf-chat-render.py TEMPLATE.jinja CASES.json           # prints the cases with "expected"
    python3 scripts/hf-chat-render.py TEMPLATE.jinja CASES.json --write   # rewrites CASES.json in place

CASES.json is a list of {"name", "messages", "tools"?, "add_generation_prompt"?, "kwargs"?}; an
"expected" field already there is ignored and replaced by the rendering.
Needs only jinja2 (tested with 3.1.6).
"""

import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' own filter: jinja2's built-in tojson would HTML-escape and sort keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(format):
    return datetime.now().strftime(format)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def render_case(template, case):
    # apply_chat_template passes tools=None and documents=None when not given; kwargs go in as variables.
    return template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case.get("add_generation_prompt", False),
        **case.get("kwargs", {}),
    )


def main(argv):
    args = [a for a in argv if a != "--write"]
    if len(args) != 2:
        sys.exit(__doc__)
    template_path, cases_path = args
    with open(template_path, encoding="utf-8") as f:
        template = compile_template(f.read())
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for case in cases:
        case = {k: v for k, v in case.items() if k != "expected"}
        case["expected"] = render_case(template, case)
        out.append(case)
    text = json.dumps(out, ensure_ascii=False, indent=2) + "\n"
    if "--write" in argv:
        with open(cases_path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
