"""The CLI reference: every command and flag of the click tree, with its ``LOCALSERVE_*`` variable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from localserve.cli import main
from localserve.cli.conventions import env_exempt

INTRO = """# Command line

Generated from the `localserve` command itself: every command and every flag, with the environment
variable that sets it. A flag given on the command line wins over its variable; a repeatable flag takes
its values from its variable separated by spaces. A boolean flag pair (`--metrics/--no-metrics`) reads one
variable, `true`/`false` (`LOCALSERVE_METRICS=false` is `--no-metrics`).
"""


def commands(
    command: click.Command = main, path: tuple[str, ...] = ("localserve",)
) -> Iterator[tuple[str, click.Command]]:
    """Every command of the tree, depth first, with its full name (``localserve export kubernetes``)."""
    yield " ".join(path), command
    if isinstance(command, click.Group):  # through click's API: localserve's subcommands are imported when asked for
        ctx = click.Context(command)
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from commands(sub, (*path, name))


def envvars(param: click.Parameter) -> list[str]:
    """The variables that set ``param`` (its ``LOCALSERVE_*`` name first)."""
    if not isinstance(param, click.Option) or env_exempt(param) or not param.envvar:
        return []
    return [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flags(param: click.Parameter, ctx: click.Context) -> str:
    names = [*param.opts, *param.secondary_opts]
    if isinstance(param, click.Argument):
        return f"`{param.make_metavar(ctx)}` (argument)"
    flags = " / ".join(f"`{name}`" for name in names)
    if isinstance(param, click.Option) and not param.is_flag and not param.count:
        flags += f" `{param.make_metavar(ctx)}`"
    return flags


def _default(param: click.Parameter, ctx: click.Context) -> str:
    if not isinstance(param, click.Option) or env_exempt(param):
        return ""
    value = param.get_default(ctx, call=False)
    if value is None or value == () or callable(value) or type(value).__name__ == "Sentinel":
        return ""
    if param.is_flag and not param.secondary_opts and value is False:
        return ""
    return f"`{value}`"


def render_command(name: str, command: click.Command) -> str:
    """One command's section: its help, usage and a table of its options."""
    ctx = click.Context(command, info_name=name)
    lines = [f"## `{name}`", "", command.help or "", ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"{name} {usage}", "```", ""]
    if isinstance(command, click.Group):
        subs = ", ".join(
            f"[`{name} {sub}`](#{(name + ' ' + sub).replace(' ', '-')})" for sub in sorted(command.list_commands(ctx))
        )
        lines += [f"Commands: {subs}.", ""]
    params = [p for p in command.params if not (isinstance(p, click.Option) and p.hidden)]
    if params:
        lines += ["| flag | environment variable | default | what it does |", "|---|---|---|---|"]
        for param in params:
            env = ", ".join(f"`{v}`" for v in envvars(param))
            help_text = getattr(param, "help", None) or ""
            lines.append(f"| {_flags(param, ctx)} | {env} | {_default(param, ctx)} | {_cell(help_text)} |")
        lines.append("")
    return "\n".join(lines)


def render() -> str:
    """The page: every command, depth first, then the conventions they share (``cli_conventions.md``)."""
    conventions = (Path(__file__).parent / "cli_conventions.md").read_text(encoding="utf-8")
    return INTRO + "\n" + "\n".join(render_command(name, cmd) for name, cmd in commands()) + "\n" + conventions


def render_environment() -> str:
    """The environment variables: localserve's flags' variables, then those it reads or sets for user code."""
    by_var: dict[str, set[str]] = {}
    for name, command in commands():
        for param in command.params:
            for var in envvars(param):
                by_var.setdefault(var, set()).add(f"`{name}` `{param.opts[0]}`")
    lines = [ENV_INTRO, "## Flags", "", "| variable | sets |", "|---|---|"]
    for var in sorted(by_var):
        lines.append(f"| `{var}` | {', '.join(sorted(by_var[var]))} |")
    return "\n".join(lines) + "\n\n" + ENV_OTHERS


ENV_INTRO = """# Environment variables

Every flag of every command can be set by a variable named after it: `LOCALSERVE_` and the long flag in
capitals, dashes as underscores. This table is generated from the commands; the variables localserve reads
or sets beyond its flags follow it.
"""

ENV_OTHERS = """## Read by localserve beyond its flags

| variable | what it does |
|---|---|
| `FORWARDED_ALLOW_IPS` | uvicorn's name for `--forwarded-allow-ips` (`LOCALSERVE_FORWARDED_ALLOW_IPS` wins) |
| `AWS_ENDPOINT_URL_S3`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, `AWS_PROFILE` | botocore's own: where and how `s3://` models are fetched |
| `LOCALSERVE_S3_ENDPOINT` | deprecated (a warning says so): the endpoint of `s3://` models; `AWS_ENDPOINT_URL_S3` wins |
| `XDG_CACHE_HOME` | the cache is `$XDG_CACHE_HOME/localserve`, else `~/.cache/localserve` (`--cache-dir` moves it) |
| `WATCHFILES_FORCE_POLLING` | watchfiles' own: poll for changes (`--reload`, multi-model folders) on file systems without events |
| `TF_CPP_MIN_LOG_LEVEL` | TensorFlow's own; `run --quiet` sets it to 2 for user code unless it is set |
| `OTEL_TRACES_EXPORTER`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SDK_DISABLED` | OpenTelemetry's own: whether requests are traced and where spans go; the SDK reads the other `OTEL_*` ([Tracing](tracing.md)) |

## Set for user code

| variable | value |
|---|---|
| `HANDLER` | the ABEJA handler, `module:function` |
| `ABEJA_TRAINING_RESULT_DIR` | `<project>/abejainc_training_result` unless set |
| `ABEJA_ORGANIZATION_ID`, `ABEJA_MODEL_ID`, `ABEJA_MODEL_VERSION_ID`, `ABEJA_DEPLOYMENT_ID`, `ABEJA_SERVICE_ID`, `TRAINING_JOB_ID` | `0000000000000` unless the environment, `.env` or `--environment` sets them (only when the config has an ABEJA handler) |
| `TRAINING_JOB_DEFINITION_NAME` | `local`, on the same terms |
| `LOCALSERVE_URL` | the server's own URL (with `--root-path`), so one API can call another: `requests.post(f"{os.environ['LOCALSERVE_URL']}/other", json=...)` |
| what `.env` and `--environment KEY:VALUE` say | exported before the handler is imported (`.env` first) |
| a predictor's `env` | the process environment of that API (two APIs giving one variable different values is a config error) |
| `PROMETHEUS_MULTIPROC_DIR`, `CUDA_VISIBLE_DEVICES` | set for each replica process at spawn (`--replicas` 2 or more) |
| `PYTHONPATH` | the folder the project's requirements were installed into goes first |
"""
