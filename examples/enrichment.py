"""Enrichment: orders joined with a customer table that is read once and finishes first.

    sluice run examples/enrichment.py --arg out=/tmp/enriched --arg orders=200000 --arg rate=20000 \
        --parallelism 2 --checkpoint-dir file:///tmp/chk --checkpoint-interval 1s

Two inputs into one keyed co-process operator (docs/multi-input.md): the customers (a bounded table,
here generated: "customer,name,tier" lines) and the orders ("order,customer,amount" lines, a stream).
Both are keyed by customer, so an order and its customer meet in one subtask. The customer input ends
after its last line, long before the orders do: the operator runs on with the orders alone, its
checkpoints record the customer input as finished, and after a failure or a resume the table is not read
again, because the names and tiers it gave are in the operator's keyed state. An order that arrives
before its customer waits in state until the customer does.

Output under `out`: [order, customer, name, tier, amount, amount after the tier's discount], exactly once.
"""

from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource

TIERS = {"gold": 20, "silver": 10, "basic": 0}
"""Discount in percent."""


def customer(i: int) -> str:
    tier = ("gold", "silver", "basic", "basic")[i % 4]
    return f"c{i},customer {i},{tier}"


def order(i: int, customers: int) -> str:
    return f"o{i},c{(i * 7) % customers},{100 + i % 900}"


class Enrich(sluice.KeyedCoProcessFunction):
    """Input 1: orders, input 2: customers (one line per customer), both keyed by customer id."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.profile = ctx.get_state(sluice.ValueStateDescriptor("profile"))
        self.waiting = ctx.get_list_state(sluice.ListStateDescriptor("waiting"))

    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Iterator[Any]:
        profile = self.profile.value()
        if profile is None:
            self.waiting.add(value)
            return
        yield self._enriched(value, profile)

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Iterator[Any]:
        _, name, tier = value
        self.profile.update((name, tier))
        for waiting in self.waiting.get():
            yield self._enriched(waiting, (name, tier))
        self.waiting.clear()

    @staticmethod
    def _enriched(order: tuple[str, str, int], profile: tuple[str, str]) -> list[Any]:
        order_id, customer_id, amount = order
        name, tier = profile
        return [order_id, customer_id, name, tier, amount, amount * (100 - TIERS[tier]) // 100]


def parse_order(line: str) -> tuple[str, str, int]:
    order_id, customer_id, amount = line.split(",")
    return order_id, customer_id, int(amount)


def build(env: sluice.StreamEnvironment) -> None:
    customers = int(env.args.get("customers", "1000"))
    orders = int(env.args.get("orders", "100000"))
    rate = float(env.args.get("rate", "0")) or None
    table = env.from_source(GeneratorSource(customer, count=customers), uid="customers").map(
        lambda line: tuple(line.split(",")), uid="parse-customers"
    )
    stream = env.from_source(
        GeneratorSource(lambda i: order(i, customers), count=orders, splits=2, rate=rate), uid="orders"
    ).map(parse_order, uid="parse-orders")
    (
        stream.connect(table)
        .key_by(lambda o: o[1], lambda c: c[0])
        .process(Enrich(), uid="enrich")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )
