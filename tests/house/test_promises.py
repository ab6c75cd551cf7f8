"""The few promises that live in configuration text rather than in code, each checked here once:
what README promises a newcomer, what CI runs, and when the site is published."""

import re

import yaml

from sitelook.project import ROOT


def test_readme_gives_exactly_two_commands_serve_and_test():
    readme_commands = re.findall(r"^(make \w+)\s+#", (ROOT / "README.md").read_text(), flags=re.M)
    assert readme_commands == ["make serve", "make test"]


def test_ci_runs_the_readme_test_command_then_again_with_the_portable_kernels_on_one_thread():
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", script, flags=re.M)
    assert re.search(
        r"^ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 make test-arithmetic$", script, flags=re.M
    )


def test_the_second_pass_leaves_out_only_the_browser_and_the_fresh_environment():
    """What `make test-arithmetic` leaves out cannot depend on PyTorch's arithmetic (README says why)."""
    makefile = (ROOT / "Makefile").read_text()
    (target,) = re.findall(r"^test-arithmetic:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert '-m "not browser and not fresh_environment"' in target
    assert "test-arithmetic" in (ROOT / "README.md").read_text()


def test_the_site_is_published_only_from_main_after_its_whole_suite_passed():
    """The published site is built in the job that ran the whole suite, after it passed; pull
    requests run the suite and publish nothing."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key "on" as True
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    jobs = workflow["jobs"]
    (name,) = [name for name, job in jobs.items() if "needs" not in job]
    steps = jobs[name]["steps"]
    runs = [step.get("run") or step.get("uses", "") for step in steps]
    tests, build_step = runs.index(".ci/run"), runs.index("make build")
    upload = next(i for i, run in enumerate(runs) if run.startswith("actions/upload-pages-artifact"))
    assert tests < build_step < upload
    assert "if" not in steps[tests]
    not_on_pull_requests = "github.event_name != 'pull_request'"
    assert steps[build_step]["if"] == steps[upload]["if"] == not_on_pull_requests
    assert set(jobs) == {name, "deploy"} and jobs["deploy"]["needs"] == name
    assert jobs["deploy"]["if"] == not_on_pull_requests
