"""Offline validation of Argo and Kubernetes YAML: schema plus a semantic lint.

`lint_text` / `lint_file` read one or more YAML documents and return one `Problem` per defect:

* Argo objects (Workflow, WorkflowTemplate, CronWorkflow) against the Argo CRD schemas of the
  chosen version in strict mode and against Argo's published JSON Schema, which editors and the
  argo-workflows SDK use (its problems say "Argo JSON Schema"; see `schema`), then the semantic
  lint below;
* any other Kubernetes object (ServiceAccount, Role, RoleBinding, ConfigMap, Pod...) with
  `kubernetes_validate` in its strict mode; a Pod also must not carry `workflows.argoproj.io/*`
  labels (Argo's controller would treat it as its own).

The semantic lint finds what a schema cannot: an entrypoint, exit handler or DAG task naming a
template that does not exist; DAG dependencies on unknown tasks, and cycles; a reference to an
undeclared parameter (``{{inputs.parameters.x}}``, ``{{workflow.parameters.x}}``, also inside
``{{=...}}`` expressions), to a task output its template does not declare or to a task that is
not an ancestor, or to an output of a task or step that may be skipped (a ``when``, a
``withParam`` that may expand to nothing, or a ``depends`` on a result of such a task: Argo 4 has
hung on this, argo-workflows #15837, #15949, #16793); unknown ``{{workflow.*}}`` variables;
unbalanced ``{{``; the CEL rules of the CRDs that jsonschema does not evaluate (one template
type, no deadline on DAG templates, not both ``depends`` and ``dependencies``); a CronWorkflow's
timezone, concurrency policy and name length; a parameter value outside its enum; and
containers that run a shell with ``-c``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from elasticdl.runtime.distribution import extra_hint
from elasticdl.workflows.schema import PLURALS, json_path, published_errors, schema_errors

KUBERNETES_VERSION = "1.33"
ARGO_GROUP = "argoproj.io/"
TEMPLATE_TYPES = (
    "container",
    "script",
    "dag",
    "steps",
    "resource",
    "suspend",
    "containerSet",
    "data",
    "http",
    "plugin",
)
WORKFLOW_VARIABLES = {
    "name",
    "namespace",
    "mainEntrypoint",
    "serviceAccountName",
    "uid",
    "parameters",
    "annotations",
    "labels",
    "creationTimestamp",
    "priority",
    "duration",
    "scheduledTime",
    "status",
    "failures",
    "outputs",
}
TEMPLATE_ROOTS = {
    "inputs",
    "outputs",
    "workflow",
    "tasks",
    "steps",
    "item",
    "pod",
    "node",
    "retries",
    "lastRetry",
    "cronworkflow",
}
DEPENDS_RESULTS = {
    "Succeeded",
    "Failed",
    "Errored",
    "Skipped",
    "Omitted",
    "Daemoned",
    "AnySucceeded",
    "AllFailed",
}
SHELLS = {"sh", "bash", "ash", "dash", "zsh", "ksh"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
PARAM_NAME = re.compile(r"^[-a-zA-Z0-9_]+$")
TAG = re.compile(r"\{\{(.*?)\}\}", re.S)


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def lint_file(path: str | Path, **kwargs: Any) -> list[Problem]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        return [Problem(str(path), f"cannot read: {err.strerror or err}")]
    return lint_text(text, source=str(path), **kwargs)


def lint_text(text: str, *, source: str = "<stdin>", **kwargs: Any) -> list[Problem]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        return [Problem(source, f"not valid YAML: {' '.join(str(err).split())}")]
    if not docs:
        return [Problem(source, "no YAML documents")]
    return lint_documents(docs, source=source, **kwargs)


def lint_documents(
    docs: list[Any],
    *,
    source: str = "<documents>",
    argo_version: str = "4",
    kubernetes_version: str = KUBERNETES_VERSION,
    schema_dir: Path | None = None,
    kubernetes_schemas: str = "required",
) -> list[Problem]:
    """Problems of every document, in order; an empty list when all are fine.

    Plain Kubernetes objects are checked against Kubernetes' schemas with kubernetes-validate
    (the `lint` extra, 100 MB of schemas): without it, `kubernetes_schemas="required"` (what
    `elasticdl lint` asks) makes that one problem naming the extra, and "if_installed" (what
    `elasticdl render` asks: its objects are checked by the project's tests) skips it."""
    catalog = {
        d["metadata"]["name"]: d
        for d in docs
        if isinstance(d, dict)
        and d.get("kind") == "WorkflowTemplate"
        and isinstance(d.get("metadata"), dict)
        and d["metadata"].get("name")
    }
    problems: list[Problem] = []
    for index, doc in enumerate(docs, 1):
        where = f"{source}: document {index}"
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            problems.append(Problem(where, "not a Kubernetes object (no apiVersion or kind)"))
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = meta.get("name") or meta.get("generateName") or "?"
        where = f"{where} ({doc['kind']} {name})"
        if str(doc["apiVersion"]).startswith(ARGO_GROUP):
            problems += _lint_argo(doc, where, argo_version, schema_dir, catalog)
        else:
            problems += _lint_kubernetes(doc, where, kubernetes_version, kubernetes_schemas)
    return problems


# -- Kubernetes objects ------------------------------------------------------------------------


def _lint_kubernetes(
    doc: dict[str, Any], where: str, version: str, schemas: str = "required"
) -> list[Problem]:
    problems = []
    try:
        import kubernetes_validate
    except ImportError:
        kubernetes_validate = None
        if schemas == "required":
            problems.append(
                Problem(
                    where,
                    f"checking Kubernetes objects needs kubernetes-validate: {extra_hint('lint')}",
                )
            )
    if kubernetes_validate is not None:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            problems.append(Problem(where, f"{json_path(err.absolute_path)}: {err.message}"))
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(
                Problem(
                    where, f"no Kubernetes {version} schema for {doc['apiVersion']} {doc['kind']}"
                )
            )
    if doc.get("kind") == "Pod":
        labels = (doc.get("metadata") or {}).get("labels") or {}
        for key in labels:
            if str(key).startswith("workflows.argoproj.io/"):
                problems.append(
                    Problem(where, f"metadata.labels.{key}: job pods must not carry Argo's labels")
                )
    return problems


# -- Argo objects ------------------------------------------------------------------------------


def _lint_argo(
    doc: dict[str, Any],
    where: str,
    argo_version: str,
    schema_dir: Path | None,
    catalog: dict[str, dict[str, Any]],
) -> list[Problem]:
    kind = doc["kind"]
    if kind not in PLURALS:
        return [Problem(where, f"kind {kind}: no schema here (known: {', '.join(PLURALS)})")]
    problems = [
        Problem(where, line)
        for line in schema_errors(doc, argo_version, strict_mode=True, schema_dir=schema_dir)
    ]
    problems += [
        Problem(where, f"Argo JSON Schema: {line}")
        for line in published_errors(doc, argo_version, schema_dir=schema_dir)
    ]
    lint = _ArgoLint(doc, catalog)
    problems += [Problem(where, line) for line in lint.run()]
    return problems


def _strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")


def _expression_refs(expression: str) -> list[str]:
    """Dotted variable paths in an expr expression (`tasks['a-b'].x` -> `tasks.a-b.x`)."""
    text = re.sub(r"\[\s*'([^']*)'\s*\]", r".\1", expression)
    text = re.sub(r'\[\s*"([^"]*)"\s*\]', r".\1", text)
    text = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`", " ", text)
    return re.findall(r"(?<![\w.])((?:workflow|inputs|tasks|steps)(?:\.[\w-]+)+)", text)


class _ArgoLint:
    def __init__(self, doc: dict[str, Any], catalog: dict[str, dict[str, Any]]) -> None:
        self.doc = doc
        self.kind = doc["kind"]
        spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        if self.kind == "CronWorkflow":
            self.prefix = "spec.workflowSpec"
            spec = spec.get("workflowSpec") if isinstance(spec.get("workflowSpec"), dict) else {}
        else:
            self.prefix = "spec"
        self.spec = spec
        self.catalog = catalog
        self.problems: list[str] = []
        templates = spec.get("templates") if isinstance(spec.get("templates"), list) else []
        self.templates = [t for t in templates if isinstance(t, dict)]
        self.by_name = {t.get("name"): t for t in self.templates}
        self.global_params = self._declared(spec.get("arguments"))
        self.ref = spec.get("workflowTemplateRef")
        if isinstance(self.ref, dict) and self.ref.get("name") in catalog:
            referenced = catalog[self.ref["name"]].get("spec") or {}
            self.global_params |= self._declared(referenced.get("arguments"))

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    @staticmethod
    def _declared(arguments: Any) -> set[str]:
        params = (arguments or {}).get("parameters") if isinstance(arguments, dict) else None
        return {p.get("name") for p in params or [] if isinstance(p, dict)}

    def run(self) -> list[str]:
        self._metadata()
        if self.kind == "CronWorkflow":
            self._cron()
        self._arguments()
        self._template_ref()
        names = [t.get("name") for t in self.templates]
        for name in sorted({n for n in names if names.count(n) > 1}, key=str):
            self.add(f"{self.prefix}.templates", f"template {name!r} is defined twice")
        has_ref = isinstance(self.ref, dict)
        if not self.templates and not has_ref:
            self.add(f"{self.prefix}.templates", "no templates and no workflowTemplateRef")
        for field_name in ("entrypoint", "onExit"):
            target = self.spec.get(field_name)
            if target and self.templates and target not in self.by_name:
                self.add(f"{self.prefix}.{field_name}", f"unknown template {target!r}")
        if self.templates and not self.spec.get("entrypoint") and not has_ref:
            self.add(f"{self.prefix}.entrypoint", "missing: which template runs first")
        for i, template in enumerate(self.templates):
            self._template(template, f"{self.prefix}.templates[{i}]")
        return self.problems

    def _metadata(self) -> None:
        meta = self.doc.get("metadata")
        if not isinstance(meta, dict):
            self.add("metadata", "missing")
            return
        name = meta.get("name")
        if not name and not (self.kind == "Workflow" and meta.get("generateName")):
            self.add("metadata", "needs a name" + (" or generateName" * (self.kind == "Workflow")))
        for key in ("name", "generateName"):
            value = meta.get(key)
            if isinstance(value, str) and value:
                check = value.rstrip("-") if key == "generateName" else value
                if len(value) > 253 or not DNS_SUBDOMAIN.match(check):
                    self.add(f"metadata.{key}", f"{value!r} is not a valid Kubernetes name")
        if self.kind == "CronWorkflow" and isinstance(name, str) and len(name) > 52:
            self.add("metadata.name", "a CronWorkflow name has at most 52 characters")
        for key in ("labels", "annotations"):
            for label in meta.get(key) or {}:
                prefix, _, local = str(label).rpartition("/")
                if not local or len(local) > 63 or not LABEL_NAME.match(local):
                    self.add(f"metadata.{key}.{label}", "not a valid key")
                if prefix and not DNS_SUBDOMAIN.match(prefix):
                    self.add(f"metadata.{key}.{label}", "not a valid key prefix")
        for label, value in (meta.get("labels") or {}).items():
            if not isinstance(value, str) or len(value) > 63 or not LABEL_NAME.match(value):
                self.add(f"metadata.labels.{label}", f"{value!r} is not a valid label value")

    def _cron(self) -> None:
        spec = self.doc.get("spec") or {}
        policy = spec.get("concurrencyPolicy")
        if policy is not None and policy not in ("Allow", "Forbid", "Replace"):
            self.add("spec.concurrencyPolicy", f"{policy!r}: expected Allow, Forbid or Replace")
        timezone = spec.get("timezone")
        if timezone:
            import zoneinfo

            try:
                zoneinfo.ZoneInfo(str(timezone))
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                self.add("spec.timezone", f"{timezone!r} is not an IANA time zone")
        if not spec.get("schedules") and not spec.get("schedule"):
            self.add("spec.schedules", "missing: when the workflow runs")

    def _arguments(self) -> None:
        arguments = self.spec.get("arguments")
        params = (arguments or {}).get("parameters") if isinstance(arguments, dict) else None
        seen: set[str] = set()
        for i, param in enumerate(params or []):
            path = f"{self.prefix}.arguments.parameters[{i}]"
            if not isinstance(param, dict):
                continue
            name = param.get("name")
            if not isinstance(name, str) or not PARAM_NAME.match(name):
                self.add(path, f"invalid parameter name {name!r}")
            if name in seen:
                self.add(path, f"parameter {name!r} is declared twice")
            seen.add(name)
            enum = param.get("enum")
            if enum and "value" in param and param["value"] not in enum:
                self.add(path, f"value {param['value']!r} is not one of its enum {enum}")

    def _template_ref(self) -> None:
        if not isinstance(self.ref, dict) or self.ref.get("name") not in self.catalog:
            return
        target = self.catalog[self.ref["name"]].get("spec") or {}
        declared = {
            p.get("name"): p
            for p in ((target.get("arguments") or {}).get("parameters") or [])
            if isinstance(p, dict)
        }
        given = {
            p.get("name"): p
            for p in ((self.spec.get("arguments") or {}).get("parameters") or [])
            if isinstance(p, dict)
        }
        path = f"{self.prefix}.arguments.parameters"
        for name, param in given.items():
            if name not in declared:
                self.add(path, f"{name!r} is not a parameter of template {self.ref['name']}")
            elif declared[name].get("enum") and param.get("value") not in declared[name]["enum"]:
                self.add(path, f"{name}: {param.get('value')!r} is not one of its enum")
        for name, param in declared.items():
            if "value" not in param and "valueFrom" not in param and name not in given:
                self.add(path, f"{name!r} is required by template {self.ref['name']}")

    # -- templates -----------------------------------------------------------------------------

    def _template(self, template: dict[str, Any], path: str) -> None:
        types = [t for t in TEMPLATE_TYPES if t in template]
        if len(types) > 1:
            self.add(path, f"template must have at most one template type, has {types}")
        if "activeDeadlineSeconds" in template and ("dag" in template or "steps" in template):
            self.add(path, "activeDeadlineSeconds is only valid for leaf templates")
        inputs = template.get("inputs") if isinstance(template.get("inputs"), dict) else {}
        params = {p.get("name") for p in inputs.get("parameters") or [] if isinstance(p, dict)}
        artifacts = {a.get("name") for a in inputs.get("artifacts") or [] if isinstance(a, dict)}
        tasks = {}
        if isinstance(template.get("dag"), dict):
            tasks = self._dag(template["dag"], f"{path}.dag")
        if isinstance(template.get("steps"), list):
            self._steps(template["steps"], f"{path}.steps")
        container = template.get("container") or template.get("script")
        if isinstance(container, dict):
            self._shell(container, f"{path}.{'container' if 'container' in template else 'script'}")
        for where, text in _strings(template, path):
            self._references(text, where, params, artifacts, tasks, template)

    def _shell(self, container: dict[str, Any], path: str) -> None:
        argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        if argv and argv[0].rsplit("/", 1)[-1] in SHELLS and "-c" in argv[1:]:
            self.add(path, "runs a shell with -c; pass the program and its arguments as a list")

    def _dag(self, dag: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
        tasks = [t for t in dag.get("tasks") or [] if isinstance(t, dict)]
        names = [t.get("name") for t in tasks]
        for name in sorted({n for n in names if names.count(n) > 1}, key=str):
            self.add(f"{path}.tasks", f"task {name!r} is defined twice")
        by_name = {t.get("name"): t for t in tasks}
        edges: dict[str, set[str]] = {}
        for i, task in enumerate(tasks):
            tpath = f"{path}.tasks[{i}]"
            name = str(task.get("name"))
            target = task.get("template")
            if target and self.templates and target not in self.by_name:
                self.add(f"{tpath}.template", f"unknown template {target!r}")
            if "depends" in task and "dependencies" in task:
                self.add(tpath, "cannot use both 'depends' and 'dependencies'")
            deps: set[str] = set(task.get("dependencies") or [])
            if isinstance(task.get("depends"), str):
                deps |= self._depends(task["depends"], f"{tpath}.depends")
            if deps and name[:1].isdigit():
                self.add(tpath, "task name cannot begin with a digit when it has dependencies")
            for dep in sorted(deps):
                if dep not in by_name:
                    self.add(f"{tpath}", f"depends on unknown task {dep!r}")
            edges[name] = {d for d in deps if d in by_name}
        cycle = _find_cycle(edges)
        if cycle:
            self.add(f"{path}.tasks", "dependency cycle: " + " -> ".join(cycle))
        ancestors = {name: _ancestors(name, edges) for name in edges}
        skippable = _skippable(tasks) if not cycle else {}
        for i, task in enumerate(tasks):
            name = str(task.get("name"))
            for where, text in _strings(
                {k: v for k, v in task.items() if k != "depends"}, f"{path}.tasks[{i}]"
            ):
                for ref in self._task_refs(text):
                    if ref in by_name and ref not in ancestors.get(name, set()) and ref != name:
                        self.add(where, f"uses task {ref!r}, which it does not depend on")
                for ref in sorted(_output_refs(text, "tasks") & set(skippable)):
                    self._skipped_output(where, "task", ref, skippable[ref])
        return by_name

    def _skipped_output(self, where: str, noun: str, ref: str, why: str) -> None:
        self.add(
            where,
            f"uses an output of {noun} {ref!r}, which may be skipped ({why}): Argo 4 can hang "
            "on this (argo-workflows #15837, #16793); take the value from one that always runs",
        )

    def _depends(self, expression: str, path: str) -> set[str]:
        names = set()
        text = re.sub(r"(&&|\|\||!|\(|\))", " ", expression)
        for token in text.split():
            name, _, result = token.partition(".")
            if result and result not in DEPENDS_RESULTS:
                self.add(path, f"{token!r}: unknown task result {result!r}")
            names.add(name)
        return names

    def _task_refs(self, text: str) -> set[str]:
        refs = set()
        for tag in TAG.findall(text):
            tag = tag.strip()
            chains = _expression_refs(tag[1:]) if tag.startswith("=") else [tag]
            for chain in chains:
                parts = chain.split(".")
                if parts[0] == "tasks" and len(parts) > 2:
                    refs.add(parts[1])
        return refs

    def _steps(self, groups: list[Any], path: str) -> None:
        skippable: dict[str, str] = {}
        for g, group in enumerate(groups):
            steps = list(group) if isinstance(group, list) else []
            for s, step in enumerate(steps):
                target = step.get("template") if isinstance(step, dict) else None
                if target and self.templates and target not in self.by_name:
                    self.add(f"{path}[{g}][{s}].template", f"unknown template {target!r}")
                if not isinstance(step, dict):
                    continue
                for where, text in _strings(step, f"{path}[{g}][{s}]"):
                    for ref in sorted(_output_refs(text, "steps") & set(skippable)):
                        self._skipped_output(where, "step", ref, skippable[ref])
            for step in steps:
                why = _may_skip(step) if isinstance(step, dict) else None
                if why:
                    skippable[str(step.get("name"))] = why

    def _references(
        self,
        text: str,
        where: str,
        params: set[str],
        artifacts: set[str],
        tasks: dict[str, dict[str, Any]],
        template: dict[str, Any],
    ) -> None:
        if text.count("{{") != len(TAG.findall(text)):
            self.add(where, "unbalanced '{{' (every '{{' needs a '}}')")
        for tag in TAG.findall(text):
            tag = tag.strip()
            if tag.startswith("="):
                for chain in _expression_refs(tag[1:]):
                    self._reference(chain, where, params, artifacts, tasks, template, True)
            else:
                self._reference(tag, where, params, artifacts, tasks, template, False)

    def _reference(
        self,
        chain: str,
        where: str,
        params: set[str],
        artifacts: set[str],
        tasks: dict[str, dict[str, Any]],
        template: dict[str, Any],
        in_expression: bool,
    ) -> None:
        parts = chain.split(".")
        root = parts[0]
        if not in_expression and root not in TEMPLATE_ROOTS:
            self.add(where, f"unknown variable {{{{{chain}}}}}")
            return
        if root == "workflow":
            if len(parts) < 2 or parts[1] not in WORKFLOW_VARIABLES:
                self.add(where, f"unknown workflow variable {chain!r}")
            elif parts[1] == "parameters" and len(parts) > 2:
                if not isinstance(self.ref, dict) or self.ref.get("name") in self.catalog:
                    if parts[2] not in self.global_params:
                        self.add(where, f"undeclared workflow parameter {parts[2]!r}")
        elif root == "inputs" and len(parts) > 2:
            declared = params if parts[1] == "parameters" else artifacts
            if parts[1] in ("parameters", "artifacts") and parts[2] not in declared:
                self.add(where, f"undeclared input {parts[1][:-1]} {parts[2]!r}")
        elif root == "tasks" and len(parts) > 2:
            if not tasks:
                self.add(where, f"{chain!r}: tasks.* only exists in a DAG template")
            elif parts[1] not in tasks:
                self.add(where, f"{chain!r}: unknown task {parts[1]!r}")
            elif parts[2:4] == ["outputs", "parameters"] and len(parts) > 4:
                target = self.by_name.get(tasks[parts[1]].get("template"))
                if target is not None:
                    outputs = (target.get("outputs") or {}).get("parameters") or []
                    if parts[4] not in {o.get("name") for o in outputs}:
                        self.add(
                            where,
                            f"{chain!r}: template {target.get('name')!r} has no output "
                            f"parameter {parts[4]!r}",
                        )


def _output_refs(text: str, root: str) -> set[str]:
    """Names X of the ``{{root.X.outputs...}}`` references in `text` (also in expressions)."""
    names = set()
    for tag in TAG.findall(text):
        tag = tag.strip()
        chains = _expression_refs(tag[1:]) if tag.startswith("=") else [tag]
        for chain in chains:
            parts = chain.split(".")
            if len(parts) > 2 and parts[0] == root and parts[2] == "outputs":
                names.add(parts[1])
    return names


def _may_skip(node: dict[str, Any]) -> str | None:
    """Why a DAG task or step may not run at all (None: it runs when its turn comes)."""
    if node.get("when"):
        return "it has a 'when'"
    if node.get("withParam"):
        return "its withParam may expand to nothing"
    return None


def _skippable(tasks: list[dict[str, Any]]) -> dict[str, str]:
    """The DAG tasks that may be skipped or omitted, with why: a `when` or a `withParam`, or a
    `depends` on a result (`A.Succeeded`...) of such a task, which is then omitted. A bare
    `depends: A` (or `dependencies`) runs after a skipped A too."""
    why = {str(t.get("name")): w for t in tasks if (w := _may_skip(t))}
    changed = True
    while changed:
        changed = False
        for task in tasks:
            name = str(task.get("name"))
            depends = task.get("depends")
            if name in why or not isinstance(depends, str):
                continue
            for dep, result in re.findall(r"([\w-]+)\.(\w+)", depends):
                if dep in why and result in DEPENDS_RESULTS:
                    why[name] = f"it depends on {dep}.{result}, and {dep} may be skipped"
                    changed = True
                    break
    return why


def _find_cycle(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def _ancestors(name: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(name, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += list(edges.get(node, ()))
    return seen
