"""``wfjobs tenants``: fair-share weights of tenants and of their categories."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands, int32, tenant_category_arguments


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    tenants = sub.add_parser(
        "tenants", help="fair-share weights of tenants and of categories within a tenant"
    )
    tsub = tenants.add_subparsers(dest="tenants_command", required=True, metavar="ACTION")
    p = parsers.add(tsub, "weights", "tenants_weights", "the fair-share weight of each tenant")
    p.add_argument("--tenant", default="", help="only this tenant's weight")
    p = parsers.add(tsub, "set-weight", "tenants_set_weight", "set a tenant's fair-share weight")
    p.add_argument("tenant", help="the tenant id")
    p.add_argument("weight", type=int32, help="1..10000 (default for every tenant: 1)")
    p = parsers.add(
        tsub,
        "category-weights",
        "tenants_category_weights",
        "the weights set for categories within their tenant",
    )
    p.add_argument("--tenant", default="", help="only this tenant's category weights")
    p = parsers.add(
        tsub,
        "set-category-weight",
        "tenants_set_category_weight",
        "set a category's share of its tenant's starts",
    )
    tenant_category_arguments(p)
    p.add_argument("weight", type=int32, help="1..10000 (default for every category: 1)")
    p = parsers.add(
        tsub,
        "remove-category-weight",
        "tenants_remove_category_weight",
        "put a category of a tenant back to weight 1",
    )
    tenant_category_arguments(p)
