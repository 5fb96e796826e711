"""The CLI's conventions: every flag of every command from its ``LOCALSERVE_*`` variable, ``-h`` and ``--help``,
and ``get --api-key``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from localserve.cli import main
from localserve.cli.conventions import env_exempt, envvar_of


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found.update(_commands(command, f"{prefix}{name} "))
        else:
            found[f"{prefix}{name}"] = command
    return found


COMMANDS = _commands(main)


def _parent() -> click.Context:
    """The context ``localserve`` gives its commands (a command's help option is made from the first one it sees)."""
    return click.Context(main, info_name="localserve", **main.context_settings)


def _sample(option: click.Option, tmp_path: Path) -> tuple[str, Any]:
    """A value for ``option`` as its variable would hold it, and what the command must receive."""
    kind = option.type
    if option.is_flag:
        return ("0", False) if option.default else ("1", True)
    if isinstance(kind, click.Path):
        if kind.dir_okay and not kind.file_okay:
            return str(tmp_path), tmp_path
        file = tmp_path / "some.file"
        file.write_text("x")
        return str(file), file
    if isinstance(kind, click.Choice):
        choice = str(kind.choices[-1])
        return choice, choice
    if isinstance(kind, click.IntRange):
        value = max(kind.min or 0, 7) if kind.min is None or kind.min <= 7 else kind.min + 1
        return str(value), value
    if isinstance(kind, click.FloatRange):
        return "2.5", 2.5
    if option.multiple:
        return "a b", ("a", "b")
    return "from-env", "from-env"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_of_every_command_is_read_from_its_localserve_variable(name: str, tmp_path: Path) -> None:
    command = COMMANDS[name]
    env: dict[str, str] = {}
    expected: dict[str, Any] = {}
    for option in command.params:
        if not isinstance(option, click.Option):
            continue
        if env_exempt(option):
            continue
        variable = envvar_of(option)
        assert variable.startswith("LOCALSERVE_") and option.show_envvar, option.name
        env[variable], expected[option.name or ""] = _sample(option, tmp_path)
    # the variables named after each long flag (--config: LOCALSERVE_CONFIG, not LOCALSERVE_CONFIG_FILE)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        context = command.make_context(name, [], parent=_parent())
    received = {key: context.params[key] for key in expected}
    assert received == expected
    # and --help documents each one
    shown = " ".join(CliRunner().invoke(main, [*name.split(), "--help"]).output.split())
    for variable in env:
        assert variable in shown, variable


def test_only_help_and_version_are_exempt() -> None:
    everything: dict[str, click.Command] = {
        "": main,
        "export": main.get_command(click.Context(main), "export"),
        **COMMANDS,
    }
    exempt = {
        (name, option.opts[-1])
        for name, command in everything.items()
        for option in command.get_params(_parent())
        if isinstance(option, click.Option) and (env_exempt(option) or not option.envvar)
    }
    assert exempt == {(name, "--help") for name in everything} | {("", "--version")}


def test_a_variable_and_a_flag_given_together_the_flag_wins() -> None:
    command = COMMANDS["serve"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCALSERVE_PORT", "9001")
        patch.setenv("LOCALSERVE_ROOT_PATH", "/env")
        context = command.make_context("serve", ["--port", "9002"], parent=_parent())
    assert (context.params["port"], context.params["root_path"]) == (9002, "/env")
    # --forwarded-allow-ips also reads uvicorn's own variable
    assert COMMANDS["serve"].params and next(p for p in command.params if p.name == "forwarded_allow_ips").envvar == [
        "LOCALSERVE_FORWARDED_ALLOW_IPS",
        "FORWARDED_ALLOW_IPS",
    ]


@pytest.mark.parametrize("name", ["run", "serve", "check"])
def test_h_is_handler_where_there_is_one_and_help_is_help(name: str) -> None:
    runner = CliRunner()
    bare = runner.invoke(main, [name, "-h"])
    assert bare.exit_code == 2
    assert bare.stderr.endswith(
        f"Error: -h is --handler here and needs the handler, e.g. `localserve {name} -h main:handler`; "
        "for help, use --help.\n"
    )
    helped = runner.invoke(main, [name, "--help"])
    assert helped.exit_code == 0 and "-h, --handler" in helped.output
    option = next(p for p in COMMANDS[name].params if p.name == "handler")
    assert "-h" in option.opts


@pytest.mark.parametrize("args", [["-h"], ["get", "-h"], ["export", "-h"], ["export", "kserve", "-h"]])
def test_h_is_help_elsewhere(args: list[str]) -> None:
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0 and done.output.startswith("Usage: ")


def test_serve_checks_its_listen_flags_before_loading(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(main, ["serve", "-h", "main:handler", "--root-path", "models"])
    assert (done.exit_code, done.stderr) == (
        1,
        "Error: Invalid --root-path 'models': expected a path starting with '/', e.g. /models.\n",
    )
    key = tmp_path / "key.pem"
    key.write_text("not a key")
    done = runner.invoke(main, ["serve", "-h", "main:handler", "--ssl-keyfile", str(key)])
    assert done.stderr == "Error: --ssl-keyfile needs --ssl-certfile (the certificate the key belongs to).\n"
    done = runner.invoke(main, ["serve", "-h", "main:handler", "--ssl-certfile", str(key), "--ssl-keyfile", str(key)])
    assert done.stderr.startswith(f"Error: --ssl-certfile {key} / --ssl-keyfile {key}: cannot load them (")
    assert done.stderr.endswith("); expected a PEM certificate and its PEM private key.\n")
