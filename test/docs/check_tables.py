#!/usr/bin/env python3
"""Compare the reference pages' tables with what the component registers.

  check_tables.py params OMPI_INFO_PARSABLE docs/mca-parameters.md
      OMPI_INFO_PARSABLE is the output of `ompi_info --param coll gpu --level 9 --parsable`.
      The page's tables must list every parameter it reports and no other; each row's
      default must be the reported value (numbers compared as numbers, "(empty...)" for an
      empty string); for an enumerated parameter (not a boolean) the row must name every value
      of its enumerator in backticks, and every value the row names outside parentheses (a
      lowercase word in backticks that is not another parameter) must be one of them.

  check_tables.py pvars PROBE_TEXTS docs/pvars.md
      PROBE_TEXTS is the output of test/mpi/config_probe.c's "texts" mode: lines
      "pvar NAME CLASS BIND" and "pvar-enum NAME VALUE ITEM". The page's tables under
      "Per communicator" must list exactly the pvars bound to a communicator, those under
      "Per process" exactly the others; each row's class must be the pvar's; for an
      enumerated pvar the row must name every "VALUE ITEM" of its enumerator.

Prints one line per difference and a last line "ok: ..." or "N differences"; exit status 0
only when there is none.
"""
import re
import sys


def table_rows(path):
    """(section heading, cells) of every table row of the page, header and rule rows left out."""
    section, rows = "", []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#"):
            section = line.strip("# \n")
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set(cells[0]) <= set("-: ") or cells[0] in ("parameter", "pvar"):
                continue
            rows.append((section, cells))
    return rows


def names_in(cell):
    return re.findall(r"`(coll_gpu_[a-z0-9_]+)`", cell)


def top_level_values(text):
    """Lowercase words in backticks outside parentheses."""
    depth, out, i = 0, [], 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                break
            if depth == 0:
                out.append(text[i + 1:j])
            i = j
        i += 1
    return [v for v in out if re.fullmatch(r"[a-z][a-z0-9_]*", v)]


def same_value(doc, real):
    if doc.startswith("(empty"):
        return real == ""
    try:
        return float(doc) == float(real)
    except ValueError:
        return doc == real


def params(parsable, page):
    values, enums, types = {}, {}, {}
    for line in open(parsable, encoding="utf-8", errors="replace"):
        m = re.match(r"^mca:coll:gpu:param:(coll_gpu_[a-z0-9_]+):(value|type|enumerator:value:[-0-9]+):(.*)$",
                     line.rstrip("\n"))
        if not m:
            continue
        name, key, val = m.groups()
        if key == "value":
            values[name] = val
        elif key == "type":
            types[name] = val
        else:
            enums.setdefault(name, []).append(val)
    bad = []
    if not values:
        return ["ompi_info reports no coll_gpu parameter"], ""
    documented = {}
    for _, cells in table_rows(page):
        for n in names_in(cells[0]):
            if n in documented:
                bad.append(f"{n}: listed twice on the page")
            documented[n] = cells
    for n in sorted(set(values) - set(documented)):
        bad.append(f"{n}: reported by ompi_info, missing from {page}")
    for n in sorted(set(documented) - set(values)):
        bad.append(f"{n}: on {page}, not a parameter ompi_info reports")
    for n in sorted(set(values) & set(documented)):
        cells = documented[n]
        if len(cells) < 3:
            bad.append(f"{n}: its row has no default column")
            continue
        doc_default = cells[1].strip("`")
        if not same_value(doc_default, values[n]):
            bad.append(f"{n}: the page's default is '{cells[1]}', ompi_info reports '{values[n]}'")
        if n in enums and types.get(n) != "bool":
            row = " | ".join(cells[1:])
            named = set(re.findall(r"`([^`]+)`", row))
            for v in enums[n]:
                if v not in named:
                    bad.append(f"{n}: the page does not name its value '{v}'")
            for v in top_level_values(cells[2]):
                if v not in enums[n] and f"coll_gpu_{v}" not in values:
                    bad.append(f"{n}: the page names '{v}', not a value ompi_info lists "
                               f"({', '.join(enums[n])})")
    return bad, f"{len(values)} parameters, {sum(1 for n in enums if types.get(n) != 'bool')} enumerated"


def pvars(texts, page):
    real, enums = {}, {}
    for line in open(texts, encoding="utf-8", errors="replace"):
        w = line.split()
        if len(w) == 4 and w[0] == "pvar":
            real[w[1]] = (w[2], w[3])
        elif len(w) >= 4 and w[0] == "pvar-enum":
            enums.setdefault(w[1], []).append(f"{w[2]} {' '.join(w[3:])}")
    if not real:
        return ["the probe lists no coll_gpu pvar"], ""
    bad, documented = [], {}
    for section, cells in table_rows(page):
        if section.startswith("Per communicator"):
            bind = "comm"
        elif section.startswith("Per process"):
            bind = "none"
        else:
            continue
        for n in names_in(cells[0]):
            if n in documented:
                bad.append(f"{n}: listed twice on the page")
            documented[n] = (bind, cells)
    for n in sorted(set(real) - set(documented)):
        bad.append(f"{n}: registered, missing from {page}")
    for n in sorted(set(documented) - set(real)):
        bad.append(f"{n}: on {page}, not a registered pvar")
    for n in sorted(set(real) & set(documented)):
        cls, bind = real[n]
        dbind, cells = documented[n]
        if bind != dbind:
            bad.append(f"{n}: bound to '{bind}', the page lists it under "
                       f"{'Per communicator' if dbind == 'comm' else 'Per process'}")
        if len(cells) < 3 or cells[1] != cls:
            bad.append(f"{n}: class '{cls}', the page says '{cells[1] if len(cells) > 1 else ''}'")
        for item in enums.get(n, []):
            if not re.search(r"(^|[ ,;(])" + re.escape(item) + r"\b", cells[-1]):
                bad.append(f"{n}: the page does not name its value '{item}'")
    return bad, f"{len(real)} pvars, {len(enums)} enumerated"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("params", "pvars"):
        print(__doc__)
        return 2
    bad, what = (params if sys.argv[1] == "params" else pvars)(sys.argv[2], sys.argv[3])
    for b in bad:
        print(b)
    print(f"{len(bad)} differences" if bad else f"ok: {what}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
