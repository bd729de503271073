"""HTML forms: listing a page's forms with their fields, and building the submission of one (the form data set of
the HTML standard: enabled named controls, checked boxes only, the selected options, one chosen submit button).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit, urlunsplit

from bs4 import Tag

from servers._common import ToolError
from servers.web_search.extract import soup_of

CONTROLS = ("input", "select", "textarea", "button")
BUTTONS = ("submit", "image", "button", "reset")


def label_of(control: Tag, labels: dict[str, str]) -> str:
    """The text of the control's ``<label for=id>`` or of the label wrapping it."""
    control_id = str(control.get("id") or "")
    if control_id in labels:
        return labels[control_id]
    wrapping = control.find_parent("label")
    return wrapping.get_text(" ", strip=True) if isinstance(wrapping, Tag) else ""


def options_of(select: Tag) -> list[dict[str, Any]]:
    return [{"value": str(o.get("value", o.get_text(strip=True))), "label": o.get_text(" ", strip=True),
             "selected": o.has_attr("selected")} for o in select.find_all("option")]  # fmt: skip


def field_of(control: Tag, labels: dict[str, str]) -> dict[str, Any]:
    """One control: name, tag, type, current value, flags, options (select) and label."""
    kind = str(control.get("type") or ("submit" if control.name == "button" else "text")).lower()
    if control.name in ("select", "textarea"):
        kind = control.name
    field: dict[str, Any] = {"name": str(control.get("name") or ""), "tag": control.name, "type": kind,
                             "value": str(control.get("value") or ""), "required": control.has_attr("required"),
                             "disabled": control.has_attr("disabled"), "label": label_of(control, labels)}  # fmt: skip
    if control.name == "textarea":
        field["value"] = control.get_text()
    elif control.name == "select":
        field["multiple"] = control.has_attr("multiple")
        field["options"] = options_of(control)
        chosen = [o["value"] for o in field["options"] if o["selected"]]
        field["value"] = chosen if field["multiple"] else (chosen or [o["value"] for o in field["options"]] or [""])[0]
    elif kind in ("checkbox", "radio"):
        field["checked"] = control.has_attr("checked")
        field["value"] = str(control.get("value") or "on")
    if control.get("placeholder"):
        field["placeholder"] = str(control["placeholder"])
    return field


@dataclass
class Form:
    """A parsed form: its attributes and every control (radio groups kept as one field with options)."""

    index: int
    id: str
    name: str
    action: str
    method: str
    enctype: str
    fields: list[dict[str, Any]]

    def summary(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "name": self.name, "action": self.action, "method": self.method,
                "enctype": self.enctype, "fields": self.fields}  # fmt: skip


def merged(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Radio buttons of one name as a single field whose options are their values."""
    out: list[dict[str, Any]] = []
    radios: dict[str, dict[str, Any]] = {}
    for field in fields:
        if field["type"] != "radio" or not field["name"]:
            out.append(field)
            continue
        group = radios.get(field["name"])
        if group is None:
            group = {**field, "value": "", "options": []}
            group.pop("checked")
            radios[field["name"]] = group
            out.append(group)
        group["options"].append({"value": field["value"], "label": field["label"], "selected": field["checked"]})
        group["required"] = group["required"] or field["required"]
        if field["checked"]:
            group["value"] = field["value"]
    return out


def parse_forms(html: str, base: str) -> list[Form]:
    """Every ``<form>`` of the page (controls linked by ``form=id`` included), actions resolved against ``base``."""
    soup = soup_of(html)
    labels = {str(lab["for"]): lab.get_text(" ", strip=True) for lab in soup.find_all("label", attrs={"for": True})}
    forms = []
    for index, form in enumerate(soup.find_all("form")):
        form_id = str(form.get("id") or "")
        controls = [c for c in form.find_all(list(CONTROLS)) if c.find_parent("form") is form]
        if form_id:
            controls += [c for c in soup.find_all(list(CONTROLS), attrs={"form": form_id}) if c not in controls]
        method = str(form.get("method") or "get").upper()
        forms.append(Form(index, form_id, str(form.get("name") or ""), urljoin(base, str(form.get("action") or "")),
                          "POST" if method == "POST" else "GET",
                          str(form.get("enctype") or "application/x-www-form-urlencoded").lower(),
                          merged([field_of(c, labels) for c in controls])))  # fmt: skip
    return forms


def pick(forms: list[Form], which: str) -> Form:
    """The form named by index, id or name ('' = the only form, or the first)."""
    if not forms:
        raise ToolError("the page has no <form>")
    if not which:
        return forms[0]
    for form in forms:
        if which in (str(form.index), form.id, form.name):
            return form
    known = [f"{f.index} (id={f.id!r}, name={f.name!r})" for f in forms]
    raise ToolError(f"no form {which!r}; the page's forms are: {', '.join(known)}")


def data_set(form: Form, values: dict[str, str | list[str]], submit: str) -> list[tuple[str, str]]:
    """The (name, value) pairs to send: the form's defaults, then ``values`` replacing whole fields."""
    names = {f["name"] for f in form.fields if f["name"] and not f["disabled"]}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ToolError(f"form {form.index} has no field {', '.join(unknown)}; its fields are: {sorted(names)}")
    files = sorted(set(values) & {f["name"] for f in form.fields if f["type"] == "file"})
    if files:
        raise ToolError(f"{', '.join(files)} is a file field; uploading files is not supported here")
    buttons = [f for f in form.fields if f["type"] in ("submit", "image") and f["name"] and not f["disabled"]]
    if submit and submit not in {b["name"] for b in buttons}:
        raise ToolError(f"no submit button named {submit!r}; buttons: {[b['name'] for b in buttons]}")
    pairs: list[tuple[str, str]] = []
    for field in form.fields:
        name = field["name"]
        if not name or field["disabled"] or field["type"] in BUTTONS or field["type"] == "file":
            if submit and field["type"] in ("submit", "image") and name == submit:
                pairs.append((name, field["value"]))
            continue
        if name in values:
            given = values[name]
            pairs += [(name, v) for v in (given if isinstance(given, list) else [given])]
        elif field["type"] == "checkbox":
            pairs += [(name, field["value"])] if field["checked"] else []
        elif isinstance(field["value"], list):
            pairs += [(name, v) for v in field["value"]]
        elif field["type"] != "radio" or field["value"]:
            pairs.append((name, field["value"]))
    sent = {name for name, value in pairs if value != ""}
    missing = sorted({f["name"] for f in form.fields if f["required"] and not f["disabled"]} - sent - {""})
    if missing:
        raise ToolError(f"required field(s) {', '.join(missing)} have no value; give them in values")
    return pairs


def get_url(action: str, pairs: list[tuple[str, str]]) -> str:
    """The action URL with its query replaced by the form data (how a GET form submits)."""
    parts = urlsplit(action)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(pairs), ""))
