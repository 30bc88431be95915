"""Tool visibility: which tools a provider round offers, and which calls it accepts.

Takes the application's tools (:class:`~pioneer.providers.ToolSpec`) and a domain map
(by default the built-in one: memory, task, artifact, computer_use; docs/explain.md,
"Tool visibility"); gives, per provider
round, a :class:`ToolRound`: the visible tools (what ``ChatRequest.tools`` carries) and
the domains still hidden (what the Hidden Tool Domains section lists). Tools outside
every domain are always visible; a domain's tools stay hidden until the model calls
``request_tools`` for it, and then become visible from the *next* round of the same
turn: a round's tool list is fixed when its request is sent.

:meth:`TurnTools.decide` judges each tool call against the round it was made in: a call
to a tool that round did not offer is refused with an error result, whatever the prompt
text says, and ``request_tools`` is answered here, never by the application.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..errors import InputError, Problem
from ..providers.request import ChatRequest, ToolCall, ToolResult, ToolSpec
from ..sections.tool_domains import DEFAULT_TOOL_DOMAINS
from ._request_tools import REQUEST_TOOLS, ToolArgumentsError, request_tools_for

__all__ = ["CallOutcome", "ToolCatalog", "ToolRound", "TurnTools", "Verdict"]

#: ``run``: the application executes the call; ``granted``: request_tools succeeded;
#: ``invalid``: the arguments were unreadable, or request_tools had bad ones; ``refused``:
#: the tool was not visible.
Verdict = Literal["run", "granted", "invalid", "refused"]


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """Every tool of the application and the hideable domains among them."""

    tools: tuple[ToolSpec, ...]
    #: Domain → its tools present in ``tools``, in domain-map order; empty domains dropped.
    domains: Mapping[str, tuple[str, ...]]

    @classmethod
    def build(
        cls, tools: Iterable[ToolSpec],
        domains: Mapping[str, Sequence[str]] = DEFAULT_TOOL_DOMAINS,
    ) -> ToolCatalog:
        """Check names (unique, ``request_tools`` reserved, one domain each) and build."""
        tools, domains = checked_shapes(tools, domains)
        problems: list[Problem] = []
        names: set[str] = set()
        for index, tool in enumerate(tools):
            if tool.name == REQUEST_TOOLS:
                problems.append(Problem(f'"{REQUEST_TOOLS}" is reserved for tool visibility',
                                        path=f"tools[{index}]"))
            elif tool.name in names:
                problems.append(Problem(f'tool name "{tool.name}" is used twice',
                                        path=f"tools[{index}]"))
            names.add(tool.name)
        owner: dict[str, str] = {}
        for domain, members in domains.items():
            for name in members:
                if name in owner and owner[name] != domain:
                    problems.append(Problem(
                        f'tool "{name}" is in domain "{owner[name]}" already',
                        path=f"domains → {domain}",
                    ))
                owner.setdefault(name, domain)
        if problems:
            raise InputError(problems)
        offered = {
            domain: tuple(name for name in dict.fromkeys(members) if name in names)
            for domain, members in domains.items()
        }
        return cls(tools, {domain: found for domain, found in offered.items() if found})

    def domain_of(self, name: str) -> str | None:
        """The domain that hides ``name``, or ``None`` for an always-visible tool."""
        return next((d for d, members in self.domains.items() if name in members), None)

    def without(self, names: Iterable[str]) -> ToolCatalog:
        """This catalog without the tools ``names`` (a domain left empty is dropped)."""
        gone = frozenset(names)
        if not gone:
            return self
        domains = {d: tuple(n for n in members if n not in gone)
                   for d, members in self.domains.items()}
        return ToolCatalog(tuple(t for t in self.tools if t.name not in gone),
                           {d: members for d, members in domains.items() if members})


def checked_shapes(
    tools: object, domains: object,
) -> tuple[tuple[ToolSpec, ...], dict[str, tuple[str, ...]]]:
    """``tools`` as a tuple of :class:`ToolSpec` and ``domains`` as name lists, or an
    :class:`InputError` naming what is not (one ToolSpec for a list, a string for a list
    of names: what a caller mistypes)."""
    if isinstance(tools, ToolSpec | str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise InputError(Problem(f"expected a list of ToolSpec (got {_kind(tools)})",
                                 path="tools"))
    found = tuple(tools)
    problems = [Problem(f"expected a ToolSpec (got {_kind(tool)})", path=f"tools[{index}]")
                for index, tool in enumerate(found) if not isinstance(tool, ToolSpec)]
    if not isinstance(domains, Mapping):
        problems.append(Problem("expected a mapping of domain names to tool names (got "
                                f"{_kind(domains)})", path="domains"))
        raise InputError(problems)
    named: dict[str, tuple[str, ...]] = {}
    for domain, members in domains.items():
        if not isinstance(domain, str) or not domain:
            problems.append(Problem(f"expected a domain name (got {domain!r})", path="domains"))
        elif isinstance(members, str | bytes) or not isinstance(members, Iterable):
            problems.append(Problem(f"expected a list of tool names (got {_kind(members)})",
                                    path=f"domains → {domain}"))
        else:
            named[domain] = tuple(members)
            problems += [Problem(f"expected a tool name (got {_kind(name)})",
                                 path=f"domains → {domain}[{index}]")
                         for index, name in enumerate(named[domain])
                         if not isinstance(name, str)]
    if problems:
        raise InputError(problems)
    return found, named


def _kind(value: object) -> str:
    """What a wrong value is, in a message: ``a string``, ``one ToolSpec``, ``int``."""
    if isinstance(value, ToolSpec):
        return "one ToolSpec"
    if isinstance(value, str):
        return f"the string {value!r}"
    return type(value).__name__


@dataclass(frozen=True, slots=True)
class ToolRound:
    """The tool set of one provider round (numbered from 1)."""

    number: int
    #: Visible tools in catalog order, then ``request_tools`` while anything is hidden.
    tools: tuple[ToolSpec, ...]
    #: Still-hidden domains → their tools, in domain-map order.
    hidden: Mapping[str, tuple[str, ...]]
    #: The turn's last round (its round limit): the body still carries the tools (a
    #: conversation with tool calls needs them, and they are the cached prefix) with
    #: ``tool_choice`` none, so no tool is visible and every call is refused.
    closed: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the tools the model may call this round, in order."""
        return () if self.closed else tuple(tool.name for tool in self.tools)

    def apply(self, request: ChatRequest) -> ChatRequest:
        """``request`` with exactly this round's tools (not callable when closed)."""
        # The tools are validated ToolSpecs with unique names (the catalog checks them),
        # so the copy keeps every ChatRequest invariant without validating again.
        return request.model_copy(update={"tools": list(self.tools),
                                          "tool_choice": "none" if self.closed else "auto"})


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one tool call was judged; ``result`` is set unless the application runs it."""

    round: int
    call_id: str
    name: str
    verdict: Verdict
    result: ToolResult | None = None
    #: Domains this call made visible from the next round (``granted`` only).
    granted: tuple[str, ...] = ()


@dataclass
class TurnTools:
    """Visibility state of one turn across its provider rounds."""

    catalog: ToolCatalog
    #: Tools the permission profile forbids (left out of ``catalog``) → why; a call to one
    #: is refused with that reason.
    forbidden: Mapping[str, str] = field(default_factory=dict)
    _visible_domains: list[str] = field(default_factory=list, init=False)
    _pending: list[str] = field(default_factory=list, init=False)
    _round: ToolRound | None = field(default=None, init=False)
    _calls: list[CallOutcome] = field(default_factory=list, init=False)

    def open(self, domains: Sequence[str]) -> tuple[str, ...]:
        """Make ``domains`` visible from the first round (the application's preflight
        selection, before any round starts); return those the catalog has tools for, the
        others having nothing to open."""
        if self._round is not None:
            raise InputError("domains are opened before the first round; the model asks for "
                             f"more with {REQUEST_TOOLS}")
        opened = tuple(d for d in dict.fromkeys(domains) if d in self.catalog.domains)
        self._visible_domains += [d for d in opened if d not in self._visible_domains]
        return opened

    def next_round(self, *, closed: bool = False) -> ToolRound:
        """Start the next provider round; domains granted in the last one become visible.
        A ``closed`` round is the turn's last: it lets the model call nothing."""
        self._visible_domains += [d for d in self._pending if d not in self._visible_domains]
        self._pending.clear()
        hidden = {d: names for d, names in self.catalog.domains.items()
                  if d not in self._visible_domains}
        shown = {name for d in self._visible_domains for name in self.catalog.domains[d]}
        tools = [t for t in self.catalog.tools
                 if self.catalog.domain_of(t.name) is None or t.name in shown]
        if hidden:
            tools.append(request_tools_for(tuple(hidden)).spec)
        number = self._round.number + 1 if self._round else 1
        if closed:
            self._round = ToolRound(number, tuple(tools), {}, closed=True)
        else:
            self._round = ToolRound(number, tuple(tools), hidden)
        return self._round

    @property
    def current(self) -> ToolRound:
        """The round in progress."""
        if self._round is None:
            raise InputError("no provider round has started; call next_round() first")
        return self._round

    @property
    def calls(self) -> tuple[CallOutcome, ...]:
        """Every judged call of the turn, in order."""
        return tuple(self._calls)

    def decide(self, call: ToolCall, *, arguments_error: str | None = None) -> CallOutcome:
        """Judge a call the model made in the current round.

        ``arguments_error`` says the model's arguments could not be read (not JSON, or
        not a JSON object: :attr:`~pioneer.providers.ModelReply.argument_errors`); a call
        to a visible tool is then answered with an error result, so the model can retry.
        """
        round_ = self.current
        if call.name not in round_.names:
            outcome = self._refuse(round_, call)
        elif arguments_error is not None:
            text = (f"arguments → (root): {arguments_error}; call {call.name} again with its "
                    "arguments as one JSON object")
            outcome = CallOutcome(round_.number, call.id, call.name, "invalid",
                                  ToolResult(call_id=call.id, content=text, is_error=True))
        elif call.name == REQUEST_TOOLS:
            outcome = self._request(round_, call)
        else:
            outcome = CallOutcome(round_.number, call.id, call.name, "run")
        self._calls.append(outcome)
        return outcome

    def _request(self, round_: ToolRound, call: ToolCall) -> CallOutcome:
        try:
            wanted = request_tools_for(tuple(round_.hidden)).parse(call.arguments)
        except ToolArgumentsError as error:
            return CallOutcome(round_.number, call.id, call.name, "invalid",
                               ToolResult(call_id=call.id, content=error.render(), is_error=True))
        self._pending += [d for d in wanted.domains if d not in self._pending]
        lines = [f"- {d}: {', '.join(round_.hidden[d])}" for d in wanted.domains]
        text = "\n".join([
            "Granted. These tools are visible from your next request in this turn:", *lines,
        ])
        return CallOutcome(round_.number, call.id, call.name, "granted",
                           ToolResult(call_id=call.id, content=text), wanted.domains)

    def _refuse(self, round_: ToolRound, call: ToolCall) -> CallOutcome:
        domain = self.catalog.domain_of(call.name)
        if call.name in self.forbidden:
            why = (f"the permission profile forbids it ({self.forbidden[call.name]}); do not "
                   "call it again, use an allowed tool or say what you could not do")
        elif round_.closed:
            why = "this is the turn's last request: answer in text now, without tool calls"
        elif call.name == REQUEST_TOOLS:
            why = "no tool domain is hidden in this round"
        elif domain is None:
            why = "it is not one of this turn's tools"
        elif domain in self._pending:
            why = (f'domain "{domain}" was granted in this round; the tool is visible from '
                   "your next request, call it again then")
        else:
            why = (f'it is in the hidden domain "{domain}"; call {REQUEST_TOOLS} with '
                   f'domains ["{domain}"] first, and call it in your next request')
        text = f'tool "{call.name}" is not available in this round: {why}'
        return CallOutcome(round_.number, call.id, call.name, "refused",
                           ToolResult(call_id=call.id, content=text, is_error=True))
