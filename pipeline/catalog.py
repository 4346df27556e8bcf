"""Reference data the stream enriches events with: the product catalogue.

Small and static, so the streaming job joins it as a broadcast table. A product id not in it makes
an event invalid (it goes to the dead-letter topic), as a lookup miss would in a real shop.
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES = ("books", "games", "music", "garden")


@dataclass(frozen=True)
class Product:
    product_id: str
    category: str
    price_cents: int


PRODUCTS: tuple[Product, ...] = tuple(
    Product(f"p-{n:02d}", CATEGORIES[n % len(CATEGORIES)], 199 + 250 * n) for n in range(20)
)
BY_ID = {p.product_id: p for p in PRODUCTS}
