"""The one table writer (results/tablewriter.py): a grid written in each format, and a
grid fitted to a terminal's width by leaving out its last metrics."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from evaltui.results.tablewriter import (
    Grid,
    column_widths,
    csv_text,
    fit_grid,
    html_table,
    latex,
    markdown,
    rich_grid,
    rich_width,
)


def grid() -> Grid:
    return Grid(["task", "mean"], [["a|b", "0.500"], ["c_d", "-0.250"]], bold={(0, 1)},
                notes=["n = 20", "95% CI"], align="lr")


def test_markdown_escapes_pipes_marks_bold_and_aligns() -> None:
    lines = markdown(grid()).splitlines()
    assert lines[:4] == ["| task | mean |", "|:---|---:|", "| a\\|b | **0.500** |",
                         "| c_d | -0.250 |"]
    assert lines[4:] == ["", "n = 20", "", "95% CI"]  # a paragraph per note
    plain = Grid(["x"], [["1"]], notes=["one", "two"])
    assert markdown(plain, italic_notes=True).splitlines() == [
        "| x |", "|---|", "| 1 |", "", "_one_", "_two_"]


def test_latex_escapes_unless_told_and_puts_notes_where_asked() -> None:
    tex = latex(grid()).splitlines()
    assert tex[0] == "\\begin{tabular}{lr}" and tex[1] == "\\toprule"
    assert tex[4] == "a|b & \\textbf{0.500} \\\\" and tex[5] == "c\\_d & -0.250 \\\\"
    assert tex[-3:] == ["\\end{tabular}", "% n = 20", "% 95% CI"]
    inside = latex(Grid(["$n$"], [["$-$1"]], notes=["50% _x_"]), escape=False,
                   notes_in_table=True).splitlines()
    assert inside[2] == "$n$ \\\\" and inside[4] == "$-$1 \\\\"
    assert inside[-2:] == ["\\multicolumn{1}{l}{\\footnotesize 50\\% \\_x\\_} \\\\",
                           "\\end{tabular}"]


def test_csv_reads_back_as_written() -> None:
    text = csv_text(["a", "b"], [["x,y", 1.5], ["", None]])
    assert list(csv.reader(io.StringIO(text))) == [["a", "b"], ["x,y", "1.5"], ["", ""]]


def test_html_escapes_every_cell_and_marks_bold() -> None:
    text = html_table(Grid(["<m>"], [["a&b"], ["0.5"]], bold={(1, 0)}), "t", bold_mark="*")
    assert text == ('<table id="t" class="metrics"><thead><tr><th>&lt;m&gt;</th></tr></thead>'
                    "<tbody><tr><td>a&amp;b</td></tr><tr><td><strong>0.5 *</strong></td></tr>"
                    "</tbody></table>")


def test_rich_grid_and_its_width_agree() -> None:
    g = grid()
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(rich_grid(g))
    widest = max(len(line) for line in console.export_text().splitlines())
    assert widest == rich_width(g) == sum(column_widths(g)) + 3 * 2 + 1
    assert column_widths(g, bold_mark=" *") == [4, 7]


def test_fit_grid_leaves_out_the_last_names_and_keeps_the_first() -> None:
    def build(names: list[str]) -> Grid:
        return Grid(["member", *names], [["m", *("0.123 [0.100, 0.150]" for _ in names)]])

    names = ["success", "spl", "ndtw", "sdtw"]
    full, none_out = fit_grid(build, names, None)
    assert none_out == [] and full.headers[1:] == names
    fitted, left_out = fit_grid(build, names, 60)
    assert fitted.headers[1:] == ["success", "spl"] and left_out == ["ndtw", "sdtw"]
    assert rich_width(fitted) <= 60 < rich_width(build(names[:3]))
    one, rest = fit_grid(build, names, 5)  # never fewer than one
    assert one.headers[1:] == ["success"] and rest == names[1:]
