#!/usr/bin/env python3
"""Writes configs/data/{math,code,swe}.jsonl (and the veRL-form samples) from the task tables in
this folder, verifying every answer with real python3 and git:
  - math: each answer equals its independent check value where one is given;
  - code: each reference solution, run with /usr/bin/python3, prints the oracle's output on every
    hidden test;
  - swe: on the buggy tree every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes;
    `git apply` accepts gold_patch; after it every listed test passes.
Run: python3 configs/data/gen/generate.py  (from the repository root)."""
import json
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from math_rows import MATH  # noqa: E402
from code_rows import CODE  # noqa: E402
from swe_rows import SWE  # noqa: E402

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TEST_COMMAND = "python3 -m unittest"


def norm_out(s):
    return "\n".join(l.rstrip() for l in s.strip("\n").split("\n")).strip()


def answer_value(a):
    """Parses the simple answer forms used in MATH to a Fraction (None when symbolic)."""
    s = a.replace("\\dfrac", "\\frac").replace("^\\circ", "").replace("\\%", "").replace("\\text{ cm}", "")
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", s)
    if m:
        return Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) else 1)
    try:
        return Fraction(s)
    except ValueError:
        return None


def write_jsonl(name, rows):
    with open(os.path.join(OUT, name), "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to configs/data/{name}")


def gen_math():
    rows = []
    for i, (problem, answer, check) in enumerate(MATH, 1):
        if check is not None:
            v = answer_value(answer)
            assert v is not None and v == Fraction(check), f"math {i}: {answer} != {check}"
        rows.append({"data_source": "math", "instance_id": f"math-{i:03d}", "problem": problem, "answer": answer})
    assert len({r["problem"] for r in rows}) == len(rows), "duplicate math problem"
    write_jsonl("math.jsonl", rows)
    # veRL's row form (DeepScaleR style), for the format tests and docs.
    verl = []
    for r in rows[:6]:
        verl.append({
            "data_source": "deepscaler",
            "prompt": [{"role": "user", "content": r["problem"] + " Let's think step by step and output the final answer within \\boxed{}."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": r["answer"]},
            "extra_info": {"index": r["instance_id"], "split": "train"},
        })
    write_jsonl("math-verl.jsonl", verl)
    return rows


def run_py(src, stdin, cwd):
    path = os.path.join(cwd, "solution.py")
    with open(path, "w") as f:
        f.write(src)
    p = subprocess.run([PY, path], input=stdin, capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout


def gen_code():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in CODE:
            tests = []
            for inp in t["inputs"]:
                expected = norm_out(t["oracle"](inp))
                rc, out = run_py(t["reference"], inp, tmp)
                assert rc == 0 and norm_out(out) == expected, f"code {t['id']}: reference gives {out!r}, oracle {expected!r} on {inp!r}"
                tests.append({"input": inp, "output": expected + "\n"})
            rows.append({
                "data_source": "code",
                "instance_id": f"code-{t['id']}",
                "problem": t["statement"],
                "tests": tests,
                "reference_solution": t["reference"],
                "time_limit_s": 5,
            })
    write_jsonl("code.jsonl", rows)
    verl = []
    for r in rows[:3]:
        verl.append({
            "data_source": "deepcoder",
            "prompt": json.dumps([{"role": "user", "content": r["problem"]}]),
            "reward_model": {"style": "rule", "ground_truth": json.dumps([dict(t, testtype="stdin") for t in r["tests"]])},
            "extra_info": {"index": r["instance_id"]},
        })
    write_jsonl("code-verl.jsonl", verl)
    return rows


def sh(cmd, cwd, check=True):
    p = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.path.dirname(PY) + ":/usr/bin:/bin", "HOME": cwd, "GIT_CONFIG_NOSYSTEM": "1"})
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd} failed in {cwd}: {p.stdout}{p.stderr}")
    return p


def materialise(files, root):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)


def git_init(root):
    sh("git init -q && git add -A && git -c user.name=raas -c user.email=raas@localhost commit -q -m base", root)


def test_passes(root, test_id):
    return sh(f"{TEST_COMMAND} {test_id}", root, check=False).returncode == 0


def gen_swe():
    rows = []
    for t in SWE:
        with tempfile.TemporaryDirectory() as tmp:
            repo = os.path.join(tmp, "repo")
            materialise(t["files"], repo)
            git_init(repo)
            for tid in t["f2p"]:
                assert not test_passes(repo, tid), f"swe {t['id']}: {tid} passes before the fix"
            for tid in t["p2p"]:
                assert test_passes(repo, tid), f"swe {t['id']}: {tid} fails before the fix"
            materialise(t["fixed"], repo)
            patch = sh("git diff", repo).stdout
            assert patch.strip(), f"swe {t['id']}: empty patch"
            sh("git checkout -q -- .", repo)
            with open(os.path.join(tmp, "gold.diff"), "w") as f:
                f.write(patch)
            sh(f"git apply {os.path.join(tmp, 'gold.diff')}", repo)
            for tid in t["f2p"] + t["p2p"]:
                assert test_passes(repo, tid), f"swe {t['id']}: {tid} fails after the gold patch"
            ids = " ".join(t["f2p"] + t["p2p"])
            assert sh(f"{TEST_COMMAND} {ids}", repo, check=False).returncode == 0
        rows.append({
            "data_source": "swe",
            "instance_id": f"swe-{t['id']}",
            "problem_statement": t["issue"],
            "files": t["files"],
            "test_command": TEST_COMMAND,
            "FAIL_TO_PASS": t["f2p"],
            "PASS_TO_PASS": t["p2p"],
            "gold_patch": patch,
        })
    write_jsonl("swe.jsonl", rows)
    return rows


if __name__ == "__main__":
    m = gen_math()
    c = gen_code()
    s = gen_swe()
    assert len(m) >= 50 and len(c) >= 20 and len(s) >= 8
    print("all references verified")
