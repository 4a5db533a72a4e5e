"""The leaderboard as Markdown, CSV and a self-contained HTML page (the plot inlined)."""

from __future__ import annotations

import base64
import csv
import html
import io

from reports.leaderboard import FINE_TUNED, MEASURED, OWN_PREFIX, PUBLISHED, VALUE_COLUMNS, Row, ranked
from reports.published import GLUE_COLUMNS, SQUAD_COLUMNS

TITLE = "ELECTRA harness leaderboard"
ABOUT = ("GLUE dev scores x100, median over fine-tuning seeds: CoLA MCC, STS-B Spearman, MNLI matched "
         "accuracy, the rest accuracy; GLUE is their mean (WNLI left out, as in the paper), with the "
         "number of tasks when fewer than eight; [low, high]: 95% interval over fine-tuning seeds and dev "
         "examples (harness compare tests differences). SQuAD dev EM/F1. FLOPs in the ELECTRA paper's "
         "convention; inference per 128-token example.")
LEGEND = "? = not known (see notes); - = not run or not published."
DEPARTING = "departing"  # measured rows whose run left ELECTRA's fine-tuning recipe
HEADERS = {"num_params": "params", "pretrain_flops": "pre-train FLOPs", "inference_flops": "infer FLOPs",
           "glue_score": "GLUE", "squad11_em": "SQuAD1.1 EM", "squad11_f1": "SQuAD1.1 F1",
           "squad20_em": "SQuAD2.0 EM", "squad20_f1": "SQuAD2.0 F1"}
SECTIONS = ((MEASURED, "Measured (this harness)"),
            (DEPARTING, "Measured, departing from the ELECTRA recipe; not comparable with the paper"),
            (PUBLISHED, "Published (reference figures, not measured here)"))
EMPTY = {MEASURED: "No rows yet: run `harness run glue` (or `harness report --runs RUN_DIR`).",
         DEPARTING: None, PUBLISHED: "No rows yet."}  # None: the section is left out when empty
# The measured section when every measured row departs from the recipe (a demo's subsampled runs)
ALL_DEPART = "No row follows the ELECTRA recipe; every measured row departs from it (next section)."
# Display columns: glue_tasks folds into the GLUE cell.
SHOWN = ("num_params", "pretrain_flops", "inference_flops", *GLUE_COLUMNS, "glue_score", *SQUAD_COLUMNS)
FLOPS_COLUMNS = ("pretrain_flops", "inference_flops")


def format_count(value: float) -> str:
    """13548800 -> '13.5M'; FLOPs 1.4e18 -> '1.4e18'."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_flops(value: float) -> str:
    """3.677e9 -> '3.68e9', as the paper prints them."""
    mantissa, _, exponent = f"{value:.3g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def cell(row: Row, column: str) -> str:
    """One table cell: '?' for a cost we could not know, '-' for a score not run or not published."""
    value = row.values.get(column)
    if value is None:
        return "?" if row.source == MEASURED and column in (*FLOPS_COLUMNS, "num_params") else "-"
    if column == "num_params":
        return format_count(value)
    if column in FLOPS_COLUMNS:
        return format_flops(value)
    text = f"{value:.1f}"
    if f"{column}_ci_low" in row.values:  # its 95% interval (seeds and dev examples)
        text += f" [{row.values[f'{column}_ci_low']:.1f}, {row.values[f'{column}_ci_high']:.1f}]"
    tasks = row.values.get("glue_tasks")
    if column == "glue_score" and tasks is not None and tasks < len(GLUE_COLUMNS):
        text += f" ({tasks:.0f}/{len(GLUE_COLUMNS)})"
    return text


def _sections(rows: list[Row]) -> list[tuple[str, list[Row], list[str]]]:
    """(section, title, rows, shown columns); columns with no value in the section are dropped, and
    the departing section when it has no rows."""
    found = []
    for section, title in SECTIONS:
        mine = ranked([r for r in rows if _section(r) == section])
        if not mine and EMPTY[section] is None:
            continue
        columns = [c for c in SHOWN if c == "glue_score" or any(c in r.values for r in mine)]
        if section != PUBLISHED:  # measured costs always show, '?' marking what is unknown
            columns = [c for c in SHOWN if c in (*FLOPS_COLUMNS, "num_params") or c in columns]
        found.append((section, title, mine, columns))
    return found


def _empty(section: str, rows: list[Row]) -> str:
    """What an empty section says: 'no rows yet' only when there are none, not when all depart."""
    if section == MEASURED and any(_section(r) == DEPARTING for r in rows):
        return ALL_DEPART
    return EMPTY[section]


def _section(row: Row) -> str:
    return DEPARTING if row.departures else row.source


def _header(column: str) -> str:
    return HEADERS.get(column, column)


def title(row: Row) -> str:
    """One line naming the row for what it is, the model first (the MLflow UI shows a name's first ~20
    characters), then pre-training FLOPs, stage and task set, score:
    'electra-tiny · 1e14 FLOPs · fine-tuned on sst2,stsb,rte · GLUE 40.7 [departs: max_train_examples=1500]',
    'ELECTRA-Small · 1.4e18 FLOPs · published on GLUE (all 8) · GLUE 79.9 · ELECTRA paper Table 1'."""
    flops = row.values.get("pretrain_flops")
    stage = (row.stage or FINE_TUNED) if row.source == MEASURED else "published"
    parts = [row.name, f"{format_flops(flops)} FLOPs" if flops is not None else "FLOPs ?",
             f"{stage} on {row.task_set or 'no task'}"]
    if "glue_score" in row.values:
        parts.append(f"GLUE {row.values['glue_score']:.1f}")
    else:
        squad = [c for c in ("squad20_f1", "squad11_f1", "squad20_em", "squad11_em") if c in row.values]
        own = [c for c in row.values if c.startswith(OWN_PREFIX) and not c.endswith(("_ci_low", "_ci_high"))]
        if squad:
            parts.append(f"{HEADERS[squad[0]]} {row.values[squad[0]]:.1f}")
        elif own:  # your own task: its name, training data digest and headline median
            parts.append(f"{own[0].removeprefix(OWN_PREFIX)} {row.values[own[0]]:.1f}")
        else:
            parts.append("no GLUE score")
    if row.source != MEASURED:
        parts.append(row.reference)
    return " · ".join(parts) + (f" [{row.recipe}]" if row.departures else "")


def details(row: Row) -> str:
    """The whole row as a two-column Markdown table (an MLflow run description)."""
    where = "measured by this harness" if row.source == MEASURED else "published, not measured here"
    shown = [c for c in SHOWN if c in row.values or (row.source == MEASURED and c in (*FLOPS_COLUMNS,
                                                                                      "num_params"))]
    pairs = [("model", row.label), ("source", where), *((("family", row.family),) if row.family else ()),
             *((("pre-training corpus", row.corpus),) if row.corpus else ()), ("recipe", row.recipe),
             ("task set", row.task_set or "-"), *((("stage", row.stage),) if row.stage else ()),
             *((_header(c), cell(row, c)) for c in shown), ("notes", row.notes or "-"),
             ("model id", row.key), ("results files" if row.source == MEASURED else "reference",
                                     "; ".join(row.reference.splitlines()))]
    lines = [f"**{row.label}**: {where}. {ABOUT}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {_markdown_cell(value)} |" for name, value in pairs]
    if row.departures:
        lines += ["", "Departs from the ELECTRA fine-tuning recipe: not comparable with the paper's figures."]
    return "\n".join(lines) + "\n"


def markdown(rows: list[Row]) -> str:
    """Measured, departing (only if any) and published tables, best GLUE first."""
    lines = [f"# {TITLE}", "", ABOUT, LEGEND]
    for section, title, mine, columns in _sections(rows):
        lines += ["", f"## {title}", ""]
        if not mine:
            lines.append(_empty(section, rows))
            continue
        extra = ["source"] if section == PUBLISHED else []
        header = ["model", *extra, *map(_header, columns), "notes"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in mine:
            cells = [row.label, *([row.reference] if extra else []), *(cell(row, c) for c in columns),
                     row.notes]
            lines.append("| " + " | ".join(map(_markdown_cell, cells)) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_csv(rows: list[Row]) -> str:
    """Every row and value column, full precision; an empty cell is a gap (see notes)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["model", "source", "recipe", "reference", *VALUE_COLUMNS, "notes", "key"])
    for _, _, mine, _ in _sections(rows):
        for row in mine:
            values = [_number(row.values.get(column)) for column in VALUE_COLUMNS]
            writer.writerow([row.model, row.source, row.recipe, row.reference.replace("\n", "; "), *values,
                             row.notes, row.key])
    return buffer.getvalue()


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:.3em .6em;border-bottom:1px solid #ddd}
th{cursor:pointer;background:#f4f4f4;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:hover td{background:#fafafa}.note{color:#666;font-size:12px}img{max-width:100%}"""
# Click a header to sort by it; numbers sort numerically, gaps last.
SORT_SCRIPT = """document.querySelectorAll('th').forEach((th,i)=>th.onclick=()=>{
const body=th.closest('table').tBodies[0],down=th.dataset.down!=='1';th.dataset.down=down?'1':'0';
const key=r=>{const t=r.cells[i].dataset.v??r.cells[i].textContent;const n=parseFloat(t);return isNaN(n)?t:n};
[...body.rows].sort((a,b)=>{const x=key(a),y=key(b);if(typeof x!==typeof y)return typeof x==='number'?-1:1;
return (x<y?-1:x>y?1:0)*(down?-1:1)}).forEach(r=>body.appendChild(r))});"""


def to_html(rows: list[Row], plot_png: bytes | None) -> str:
    """One file, no external resources: tables sortable by clicking a header, the plot as a data URI."""
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(TITLE)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{esc(TITLE)}</h1><p>{esc(ABOUT)}</p>"
             f"<p class='note'>{esc(LEGEND)} Click a column header to sort.</p>"]
    if plot_png:
        parts.append("<img alt='GLUE score versus pre-training FLOPs' src='data:image/png;base64,"
                     f"{base64.b64encode(plot_png).decode()}'>")
    for section, title, mine, columns in _sections(rows):
        parts.append(f"<h2>{esc(title)}</h2>")
        if not mine:
            parts.append(f"<p>{esc(_empty(section, rows))}</p>")
            continue
        extra = ["source"] if section == PUBLISHED else []
        head = "".join(f"<th>{esc(h)}</th>" for h in ["model", *extra, *map(_header, columns), "notes"])
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
        for row in mine:
            cells = [f"<td title='{esc(row.key)}'>{esc(row.label)}</td>"]
            cells += [f"<td>{esc(row.reference)}</td>"] if extra else []
            for column in columns:
                value = row.values.get(column)
                sort_value = "" if value is None else f" data-v='{value!r}'"
                cells.append(f"<td class='n'{sort_value}>{esc(cell(row, column))}</td>")
            cells.append(f"<td class='note'>{esc(row.notes)}</td>")
            parts.append(f"<tr>{''.join(cells)}</tr>")
        parts.append("</tbody></table>")
    parts.append(f"<script>{SORT_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"
