"""What every command's ``--help`` shows beyond its own text: value placeholders that name what to type (``N``,
``PATH``, ``TEXT``) where Typer would print Python types (``<bool>``, ``<list[str]>``), no placeholder on a flag,
text printed as written (Typer reads help as Rich markup, where ``[cluster]`` vanishes), and, after the exit
codes, the environment variables the command reads."""

from __future__ import annotations

import typer
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

try:   # Typer from 0.2x carries its own click
    from typer._click.exceptions import UsageError
except ImportError:
    from click.exceptions import UsageError

CACHE = ("KERNELWRIGHT_CACHE_DIR (compile cache, device ceilings, best-known kernels; default "
         "$XDG_CACHE_HOME/kernelwright or ~/.cache/kernelwright)")
GPU = "CUDA_VISIBLE_DEVICES (which GPUs CUDA shows)"
TERMINAL = "COLUMNS and NO_COLOR (terminal width and colour)"
MODEL = ("OPENAI_BASE_URL (the endpoint when --base-url and the config name none), OPENAI_API_KEY or the variable "
         "--api-key-env names (the key), HTTPS_PROXY/HTTP_PROXY/NO_PROXY (the route to the endpoint)")

# What each command reads; a command not named here reads only the terminal's variables.
ENVIRONMENT = {
    "compile": (CACHE,), "eval": (CACHE, GPU), "check-task": (CACHE,), "doctor": (CACHE, GPU),
    "profile": (CACHE, GPU), "optimize": (MODEL, CACHE, GPU), "batch": (MODEL, CACHE, GPU), "verify": (CACHE, GPU),
    "best": (CACHE, GPU), "import": (CACHE, GPU), "export": (CACHE,),
}

_KINDS = {"str": "TEXT", "int": "N", "float": "NUMBER", "Path": "PATH", "bool": ""}


def placeholder(param: TyperArgument | TyperOption) -> str:
    """What to type for a parameter: an argument's own name, a flag nothing, else the kind of value (``N``,
    ``PATH``...; ``PATH...`` for several)."""
    if isinstance(param, TyperArgument):
        return (param.name or "value").upper()   # the usage line adds "..." where it takes several
    kind, many = _kind(param)
    return f"{kind}..." if many and kind else kind


def _kind(param: TyperOption) -> tuple[str, bool]:
    """(placeholder, takes several) from the parameter's type: newer Typer names its Python type (``bare_type``),
    Typer built on click holds a click type."""
    bare = getattr(param, "bare_type", None)
    if bare is not None:
        name = bare()
        many = name.startswith("list[")
        return _KINDS.get(name[5:-1] if many else name, "VALUE"), many
    import click

    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return "", False
    kind = param.type
    text = ("N" if isinstance(kind, click.types.IntParamType) else
            "NUMBER" if isinstance(kind, click.types.FloatParamType) else
            "PATH" if isinstance(kind, (click.Path, click.File)) else
            "TEXT" if isinstance(kind, click.types.StringParamType) else "VALUE")
    return text, bool(getattr(param, "multiple", False))


def environment_footer(name: str | None) -> str:
    variables = ENVIRONMENT.get(name or "", ()) + (TERMINAL,)
    return "Environment: " + "; ".join(variables) + "."


def usage_error(exc: UsageError) -> typer.Exit:
    """A mistyped command line as one line on stderr (docs/cli.md), and exit code 2."""
    from rich.text import Text

    from ..redact import redact_urls_in
    from .terminal import SafeConsole, visible

    path = exc.ctx.command_path if exc.ctx is not None else "kernelwright"
    message = redact_urls_in(f"{exc.format_message()} ({path} --help lists what it takes)")
    SafeConsole(stderr=True, markup=False, highlight=False).print(
        Text.assemble(("error:", "bold red"), " ", visible(message)), soft_wrap=True)
    return typer.Exit(2)


class _OneLineErrors:
    """Usage errors (an unknown option or command, a missing or malformed value) as one line, not a box."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            raise usage_error(exc) from None


def _readable(command) -> None:
    for param in command.params:
        if isinstance(param, (TyperArgument, TyperOption)):
            if param.metavar is None:
                param.metavar = placeholder(param)
            if isinstance(param, TyperArgument):
                param.display_type_rich = _no_type   # its name already stands in the usage and the table
            if param.help:
                param.help = escape(param.help)


class Command(_OneLineErrors, TyperCommand):
    """A Typer command with the help described above."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _readable(self)
        if self.help:
            self.help = escape(self.help)
        footer = environment_footer(self.name)
        self.epilog = escape(f"{self.epilog}\n\n{footer}" if self.epilog else footer)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Group(_OneLineErrors, TyperGroup):
    """The top-level command: its options read as a command's do, a mistyped command is one line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _readable(self)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:   # where no command caught it (reading the command line, importing a command)
            import sys

            sys.stderr.write("\ninterrupted\n")
            raise typer.Exit(130) from None

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            raise usage_error(exc) from None

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


def _no_type(ctx) -> None:
    return None
