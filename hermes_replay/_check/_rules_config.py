"""Rules about servers, providers and toolsets — what ``config_init`` and the config decide.

Facts these rules rest on (atroposlib 0.4.0, read from its source):
* ``ServerManager`` honours ``base_url`` only from a *list* of ``APIServerConfig``; a single
  config makes it build four servers at ``localhost:9004-9007``.
* ``APIServerConfig.server_type`` defaults to ``"openai"`` and ``health_check`` to True; with
  health_check on, ``OpenAIServer`` sends a real one-token chat request every second.
* ``enabled_toolsets=None`` means *every* toolset; the class variable ``default_toolsets`` is
  a hint only (environments/hermes_base_env.py).
"""

from __future__ import annotations

import ast
import ipaddress
import re
from urllib.parse import urlsplit

from hermes_replay._check._source import (
    EnvSource,
    bound_names,
    call_attr,
    calls,
    class_assigns,
    docstring_nodes,
    keyword,
)
from hermes_replay._check._static import Emitter, rule

# Hosted inference APIs (API hosts only: a docs link to platform.openai.com is not a setting).
_PROVIDER_HOST = re.compile(
    r"^(openrouter\.ai|generativelanguage\.googleapis\.com"
    r"|api\.(openai\.com|anthropic\.com|together\.xyz|together\.ai|groq\.com|deepseek\.com"
    r"|mistral\.ai|fireworks\.ai|x\.ai|cohere\.ai|cohere\.com))$|\.openai\.azure\.com$"
)
_PROVIDER_MODEL = re.compile(
    r"^(gpt-|chatgpt-|o[134](-|$)|claude-|gemini-|grok-|"
    r"(anthropic|openai|google|x-ai|mistralai|deepseek|cohere)/)",
    re.IGNORECASE,
)
# Names of settings that pick an endpoint or a model (tokenizer names are not providers).
_SETTING_NAME = re.compile(r"(model|base_url|api_base|endpoint|_url$|^url$)", re.IGNORECASE)


def _is_env_lookup(call: ast.Call) -> bool:
    name = call_attr(call)
    text = ast.unparse(call.func)
    return name == "getenv" or (name == "get" and "environ" in text)


def value_strings(expr: ast.AST) -> list[ast.Constant]:
    """String literals an expression can evaluate to (env-var *names* excluded)."""
    skip: set[int] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and _is_env_lookup(node) and node.args:
            skip.add(id(node.args[0]))
        if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
            skip.add(id(node.slice))
    return [
        n for n in ast.walk(expr)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def _host(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return None
    return parts.hostname.lower()


def _openrouter_api(url: str) -> bool:
    path = urlsplit(url.strip()).path
    return path in {"", "/"} or path.startswith("/api")


def is_local(host: str) -> bool:
    """The user's own machine or network: a vLLM/SGLang they run, not a hosted API."""
    if host in {"localhost", "0.0.0.0"} or host.endswith((".local", ".internal", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


def _server_list_problem(func: ast.AST, value: ast.expr) -> bool:
    single = bound_names(func, lambda v: isinstance(v, ast.Call)
                         and call_attr(v) == "APIServerConfig")
    if isinstance(value, ast.Call) and call_attr(value) == "APIServerConfig":
        return True
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
        return True  # default_server_configs()[0] and friends: one item taken out of the list
    return isinstance(value, ast.Name) and value.id in single


@rule(
    "server-list",
    "config_init returns (config, [APIServerConfig(...)]) — a list",
    "return `env_config, [APIServerConfig(...)]` (wrap the server config in a list)",
)
def config_init_list(src: EnvSource, out: Emitter) -> None:
    """A single config makes atroposlib ignore base_url and use localhost:9004-9007."""
    for _cls, method in src.methods_named("config_init"):
        for node in ast.walk(method):
            if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)):
                continue
            if len(node.value.elts) >= 2 and _server_list_problem(method, node.value.elts[1]):
                out.fail(node, "config_init returns a single server config, not a list: "
                         "atroposlib's ServerManager then ignores its base_url and talks to "
                         "four servers at localhost:9004-9007")


@rule(
    "server-type",
    "an external API has server_type=\"openai\"; OpenRouter has health_check=False",
    "add `server_type=\"openai\", health_check=False` to the APIServerConfig",
)
def server_type(src: EnvSource, out: Emitter) -> None:
    """A non-local base_url speaks the OpenAI protocol and has no /health to poll."""
    for call in calls(src.tree):
        if call_attr(call) != "APIServerConfig":
            continue
        url_kw = keyword(call, "base_url")
        hosts = [h for c in (value_strings(url_kw.value) if url_kw else [])
                 if (h := _host(c.value)) and not is_local(h)]
        if not hosts:
            continue
        kind = keyword(call, "server_type")
        kind_value = kind.value.value if kind and isinstance(kind.value, ast.Constant) else None
        if kind is None:
            out.warn(call, f"APIServerConfig for external {hosts[0]} does not set server_type: "
                     "it works only because atroposlib 0.4.0 defaults to 'openai' (the seed "
                     "and older releases assume a local vLLM), and a YAML key overrides it "
                     "silently", "add `server_type=\"openai\"`")
        elif kind_value is not None and kind_value != "openai":
            out.fail(kind, f"server_type={kind_value!r} for external {hosts[0]}: atroposlib "
                     f"would speak the {kind_value} protocol (/generate, /health) to an "
                     "OpenAI-compatible API", "set `server_type=\"openai\"`")
        check = keyword(call, "health_check")
        if check is not None and not isinstance(check.value, ast.Constant):
            continue  # decided at run time; nothing to say statically
        if check is not None and check.value.value is False:
            continue
        if any("openrouter" in h for h in hosts):
            out.fail(check or call, "OpenRouter with health_check on: it has no /health, and "
                     "atroposlib's check sends a real chat request every second and marks the "
                     "server unhealthy when it fails", "set `health_check=False`")
        else:
            out.warn(check or call, f"health_check is on for external {hosts[0]}: atroposlib "
                     "sends a real (billed) one-token chat request to it every second",
                     "set `health_check=False`")


def _setting_values(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """``(setting name, value)`` for keyword args, assignments, defaults and dict entries."""
    out: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg:
            out.append((node.arg, node.value))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                name = getattr(target, "id", None) or getattr(target, "attr", None)
                if name:
                    out.append((name, node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            name = getattr(node.target, "id", None) or getattr(node.target, "attr", None)
            if name:
                out.append((name, node.value))
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            for arg, default in zip(positional[len(positional) - len(node.defaults):],
                                    node.defaults, strict=True):
                out.append((arg.arg, default))
            for arg, default in zip(node.kwonlyargs, node.kw_defaults, strict=True):
                if default is not None:
                    out.append((arg.arg, default))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out.append((key.value, value))
    return out


@rule(
    "no-hardcoded-provider",
    "no provider URL or hosted model name is hard-coded",
    "take the endpoint and model from flags or env vars with no provider default "
    "(`--openai.base_url`, `--openai.model_name`, or os.environ[\"...\"]) and ask the user "
    "which provider to use",
)
def hardcoded_provider(src: EnvSource, out: Emitter) -> None:
    """Never assume a provider: a default endpoint or model bills someone else's account."""
    docstrings = docstring_nodes(src.tree)
    flagged: set[int] = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            host = _host(node.value)
            if host and _PROVIDER_HOST.search(host) and " " not in node.value.strip():
                if host == "openrouter.ai" and not _openrouter_api(node.value):
                    continue  # a link to its site or docs, not the API
                if id(node) not in docstrings:
                    flagged.add(id(node))
                    out.fail(node, f"hard-coded provider endpoint {node.value.strip()!r}: the "
                             "environment silently sends traffic (and the user's key) there")
    for name, value in _setting_values(src.tree):
        if not _SETTING_NAME.search(name) or "tokenizer" in name.lower():
            continue
        for const in value_strings(value):
            if id(const) in flagged or not _PROVIDER_MODEL.match(const.value.strip()):
                continue
            flagged.add(id(const))
            out.fail(const, f"hard-coded hosted model {const.value!r} for `{name}`: the run "
                     "assumes a provider instead of the model the user chose")


def _sets_enabled_toolsets(src: EnvSource) -> bool:
    for node in ast.walk(src.tree):
        if isinstance(node, ast.keyword) and node.arg == "enabled_toolsets":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "enabled_toolsets":
            if isinstance(node.ctx, ast.Store):
                return True
        if isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "enabled_toolsets"
                   for k in node.keys):
                return True
    return any(class_assigns(info, "enabled_toolsets") for info in src.classes.values())


@rule(
    "toolsets",
    "default_toolsets is backed by the enabled_toolsets config field",
    "set the config field: `YourEnvConfig(enabled_toolsets=list(cls.default_toolsets), ...)` "
    "in config_init (or a `enabled_toolsets` Field default in the config class)",
    hermes_only=True,
)
def default_toolsets_need_enabled(src: EnvSource, out: Emitter) -> None:
    """default_toolsets is only a hint: with enabled_toolsets None the model gets every tool."""
    if _sets_enabled_toolsets(src):
        return
    for info in src.classes.values():
        stmt = class_assigns(info, "default_toolsets")
        if stmt is None:
            continue
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and value.value is None:
            continue
        out.fail(stmt, f"{info.node.name}.default_toolsets is set but nothing sets the config "
                 "field enabled_toolsets: it stays None, so the model is offered every "
                 "toolset, not these")
