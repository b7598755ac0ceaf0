"""The web shop: a generated catalogue, BM25 search, WebShop's pages and action grammar, exact goal distance,
latched subgoals and the text environment (``milepost/WebShop-v0``)."""

from milepost.envs.webshop.catalogue import Catalogue, Product, get_catalogue
from milepost.envs.webshop.distance import DistanceModel, bfs_distance
from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.goal import Requirement, Shop, get_shop
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.search import SearchIndex
from milepost.envs.webshop.state import Action, Order, ShopState, parse_action
from milepost.envs.webshop.tasks import generate_task, make_task

__all__ = [
    "Action",
    "Catalogue",
    "DistanceModel",
    "Order",
    "Product",
    "Requirement",
    "SearchIndex",
    "Shop",
    "ShopState",
    "WebShopEnv",
    "WebShopRules",
    "bfs_distance",
    "generate_task",
    "get_catalogue",
    "get_shop",
    "make_task",
    "parse_action",
]
