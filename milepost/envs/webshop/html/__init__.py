"""The shop as a web page: a FastAPI app over the same environment and state object as the text shop."""

from milepost.envs.webshop.html.app import ShopSession, create_app, element_id

__all__ = ["ShopSession", "create_app", "element_id"]
