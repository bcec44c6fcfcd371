"""Renders a Helm chart the way a `helm install` command line would, with Helm's own engine.

helm-python-sdk (pinned in scripts/peers.sh) binds Helm's Go SDK (v4) as a shared library, so
no `helm` binary, Go toolchain or cluster is needed. Reads one JSON object on stdin:

    {"argv": ["install", "NAME", "CHART", "--set", "a=b", ...], "namespace": "default"}

(the argv of a `helm` command as a shell expanded it; CHART relative to the current directory)
and prints one JSON object: {"manifests": {template path: text}, "lint": Helm's lint report
for the same values, "values": the values given}, or {"error": "..."} when Helm refuses to
render (a `fail` or `required` of the chart, malformed values).

Values are composed as `helm` composes them (pkg/cli/values): every --values file in order
(maps merged, anything else replaced), then --set-json, --set, --set-string, each expression
parsed by Helm's own parser (strvals) and merged into the same map (a list index sets that
element, keeping the others). An option this script does not know is refused, so a documented
command line cannot pass by an option being ignored.
"""

import json
import sys

import helm_python as helm

WITH_VALUE = {"--set", "--set-string", "--set-json", "--values", "-f", "--namespace", "-n"}
NO_VALUE = {"--create-namespace", "--atomic", "--wait"}


def parse_argv(argv):
    """The command's release name, chart and options, in order."""
    if argv[:2] == ["upgrade", "--install"]:
        argv = argv[1:]
    if not argv or argv[0] not in ("install", "template", "--install"):
        raise SystemExit(f"not a helm install/template command: {argv[:1]}")
    positional, options, rest = [], [], list(argv[1:])
    while rest:
        word = rest.pop(0)
        if word.startswith("-"):
            name, eq, value = word.partition("=")
            if name in NO_VALUE and not eq:
                continue
            if name not in WITH_VALUE:
                raise SystemExit(f"helm option {name} is not understood by tests/peers/helm_chart.py")
            options.append((name, value if eq else rest.pop(0)))
        else:
            positional.append(word)
    if len(positional) != 2:
        raise SystemExit(f"want RELEASE CHART, got {positional}")
    return positional[0], positional[1], options


def merge(base, over, lists_by_index):
    """`over` merged into `base`: maps key by key; lists element by element when
    `lists_by_index` (strvals into an existing list; a None element keeps the base's)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base[k], v, lists_by_index) if k in base else v
        return out
    if lists_by_index and isinstance(base, list) and isinstance(over, list):
        out = list(base) + [None] * (len(over) - len(base))
        for i, v in enumerate(over):
            if v is not None:
                out[i] = merge(out[i], v, lists_by_index) if out[i] is not None else v
        return out
    return over


def compose(options):
    """The values, composed in helm's order."""
    values = {}
    for name, value in options:
        if name in ("--values", "-f"):
            with open(value, encoding="utf-8") as f:
                values = merge(values, helm.values_from_yaml(f.read()), False)
    parsers = [("--set-json", helm.parse_set_json), ("--set", helm.parse_set_string),
               ("--set-string", helm.parse_set_string_values)]
    for flag, parse in parsers:
        for name, value in options:
            if name == flag:
                values = merge(values, parse(value), True)
    return values


def main():
    request = json.load(sys.stdin)
    release, chart_path, options = parse_argv(request["argv"])
    namespace = request.get("namespace", "default")
    for name, value in options:
        if name in ("--namespace", "-n"):
            namespace = value
    values = compose(options)
    try:
        with helm.Chart.load(chart_path) as chart:
            manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm.HelmError as e:
        print(json.dumps({"error": str(e), "values": values}))
        return
    lint = helm.lint(chart_path, values, namespace=namespace)
    print(json.dumps({"manifests": manifests, "lint": lint, "values": values, "release": release,
                      "namespace": namespace}))


if __name__ == "__main__":
    main()
