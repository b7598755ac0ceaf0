"""Words of the medium and hard catalogues: options per product type, paraphrases of attributes and product types,
title templates and page text that describes a product without restating its attribute list.

The easy catalogue (``catalogue.CATEGORIES``) gives every product of a category the category's option dimensions
("wireless earbuds, length: 3 ft"); here each product type has its own. A paraphrase never equals another
attribute, an option value or a product type, so an instruction written with paraphrases still names exactly one
requirement. All text is ASCII.
"""

from __future__ import annotations

_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_CLOTH_COLORS = ("black", "white", "navy", "heather grey", "red", "olive green", "beige")
_TECH_COLORS = ("black", "white", "silver", "space grey", "blue", "pink")
_HOME_COLORS = ("white", "ivory", "charcoal", "sage green", "dusty blue", "terracotta")
_PET_COLORS = ("brown", "grey", "blue", "orange", "green")

# Product type -> its option dimensions (dimension -> values, in page order). No value repeats across the
# dimensions of one type, so a click on a value names one dimension.
# ruff: noqa: E501 - one line per product type reads as a table
TYPE_OPTIONS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "tee": (("size", _SIZES), ("color", _CLOTH_COLORS)),
    "hoodie": (("size", _SIZES), ("color", _CLOTH_COLORS)),
    "jeans": (("waist", ("28w", "30w", "32w", "34w", "36w")), ("inseam", ("30l", "32l", "34l"))),
    "dress": (("size", _SIZES[:5]), ("color", _CLOTH_COLORS)),
    "rain jacket": (("size", _SIZES), ("color", ("black", "navy", "red", "olive green", "yellow"))),
    "running shorts": (("size", _SIZES[:5]), ("inseam", ("5 inch", "7 inch", "9 inch"))),
    "shampoo": (("volume", ("8 fl oz", "12 fl oz", "16 fl oz", "33.8 fl oz")), ("scent", ("unscented", "lavender", "coconut", "citrus", "mint"))),
    "moisturizer": (("volume", ("1 fl oz", "1.7 fl oz", "2 fl oz", "4 fl oz")), ("skin type", ("dry skin", "oily skin", "combination skin"))),
    "lip balm": (("pack", ("pack of 1", "pack of 3", "pack of 6")), ("flavor", ("mint", "vanilla", "cherry", "honey"))),
    "face serum": (("volume", ("0.5 fl oz", "1 fl oz", "2 fl oz")),),
    "sunscreen": (("spf", ("spf 30", "spf 50", "spf 70")), ("volume", ("3 fl oz", "5 fl oz", "8 fl oz"))),
    "hair oil": (("volume", ("1 fl oz", "2 fl oz", "4 fl oz")), ("scent", ("unscented", "argan", "coconut", "rosemary"))),
    "green tea": (("count", ("20 bags", "40 bags", "100 bags")), ("flavor", ("original", "jasmine", "mint", "lemon"))),
    "coffee beans": (("weight", ("12 oz", "2 lb", "5 lb")), ("roast", ("light roast", "medium roast", "dark roast"))),
    "granola": (("flavor", ("original", "honey almond", "berry", "chocolate")), ("pack", ("pack of 1", "pack of 2", "pack of 4"))),
    "dark chocolate": (("cacao", ("70% cacao", "85% cacao", "90% cacao")), ("pack", ("pack of 1", "pack of 4", "pack of 12"))),
    "pasta sauce": (("flavor", ("marinara", "tomato basil", "arrabbiata", "roasted garlic")), ("pack", ("pack of 1", "pack of 3", "pack of 6"))),
    "almond butter": (("texture", ("creamy", "crunchy")), ("size", ("12 oz", "16 oz", "32 oz"))),
    "usb c cable": (("length", ("3 ft", "6 ft", "10 ft")), ("color", _TECH_COLORS)),
    "phone case": (("model", ("iphone 13", "iphone 14", "iphone 15", "galaxy s23", "pixel 8")), ("color", _TECH_COLORS)),
    "wireless earbuds": (("color", _TECH_COLORS),),
    "power bank": (("capacity", ("5000 mah", "10000 mah", "20000 mah")), ("color", _TECH_COLORS)),
    "wireless charger": (("power", ("10w", "15w")), ("color", ("black", "white"))),
    "hdmi adapter": (("pack", ("pack of 1", "pack of 2")), ("color", ("black", "silver", "space grey"))),
    "throw pillow": (("size", ("16 x 16 in", "18 x 18 in", "20 x 20 in")), ("color", _HOME_COLORS)),
    "bath towel": (("pack", ("set of 2", "set of 4", "set of 6")), ("color", _HOME_COLORS)),
    "desk lamp": (("color", ("black", "white", "brass")),),
    "storage basket": (("size", ("small", "medium", "large")), ("color", _HOME_COLORS)),
    "bed sheet set": (("size", ("twin", "full", "queen", "king")), ("color", _HOME_COLORS)),
    "shower curtain": (("size", ("72 x 72 in", "72 x 84 in")), ("color", _HOME_COLORS)),
    "dog bed": (("size", ("small", "medium", "large", "x-large")), ("color", _PET_COLORS)),
    "cat toy": (("pack", ("pack of 3", "pack of 6", "pack of 12")),),
    "dog leash": (("length", ("4 ft", "6 ft", "10 ft")), ("color", _PET_COLORS)),
    "pet shampoo": (("volume", ("8 fl oz", "16 fl oz")), ("scent", ("unscented", "oatmeal", "lavender"))),
    "cat litter": (("weight", ("10 lb", "20 lb", "40 lb")), ("scent", ("unscented", "fresh scent"))),
    "chew toy": (("size", ("small", "medium", "large")), ("flavor", ("bacon", "chicken", "peanut butter"))),
}  # fmt: skip

# Attribute -> ways an instruction or a page may say it without its words in that order.
ATTRIBUTE_PHRASES: dict[str, tuple[str, ...]] = {
    "cotton": ("made of cotton", "all cotton"),
    "slim fit": ("with a slim cut", "fitted close to the body"),
    "organic": ("organically made", "certified organic"),
    "long sleeve": ("with long sleeves", "full sleeved"),
    "machine washable": ("safe in the washing machine", "easy to wash at home"),
    "lightweight": ("light to wear", "barely weighs anything"),
    "waterproof": ("that keeps water out", "proof against rain"),
    "breathable": ("that breathes well", "airy"),
    "stretch": ("stretchy", "with some give"),
    "recycled polyester": ("made from recycled plastic bottles", "of recycled poly"),
    "paraben free": ("without parabens", "with no parabens"),
    "fragrance free": ("without added perfume", "with no fragrance"),
    "vegan": ("plant based", "with no animal ingredients"),
    "sulfate free": ("without sulfates", "with no sulfates"),
    "long lasting": ("that lasts all day", "long wearing"),
    "sensitive skin": ("gentle enough for sensitive skin", "suited to delicate skin"),
    "travel size": ("small enough for a carry-on", "travel sized"),
    "cruelty free": ("not tested on animals", "made without animal testing"),
    "hyaluronic acid": ("with hyaluronic acid in it", "hydrating with hyaluronic acid"),
    "gluten free": ("without gluten", "safe for a gluten-free diet"),
    "sugar free": ("with zero sugar", "without sugar"),
    "non gmo": ("made without gmos", "non-gmo verified"),
    "keto friendly": ("that fits a keto diet", "suitable for keto"),
    "low sodium": ("low in salt", "with little salt"),
    "caffeine free": ("without caffeine", "decaf"),
    "kosher": ("certified kosher", "kosher certified"),
    "fair trade": ("fairly traded", "fair-trade certified"),
    "high protein": ("rich in protein", "packed with protein"),
    "dairy free": ("without dairy", "with no milk ingredients"),
    "fast charging": ("that charges quickly", "with quick charge"),
    "noise cancelling": ("that blocks outside noise", "with active noise control"),
    "bluetooth": ("that pairs over bluetooth", "bluetooth enabled"),
    "water resistant": ("that survives splashes", "splash proof"),
    "braided": ("with a braided nylon jacket", "nylon braided"),
    "magnetic": ("that snaps on with magnets", "with built-in magnets"),
    "compact": ("small enough for a pocket", "pocket sized"),
    "shockproof": ("that survives drops", "drop proof"),
    "long battery life": ("with a battery that lasts for days", "that runs a long time per charge"),
    "led indicator": ("with a status light", "with an indicator light"),
    "blackout": ("that blocks out light", "room darkening"),
    "hypoallergenic": ("allergy friendly", "safe for allergy sufferers"),
    "dimmable": ("with adjustable brightness", "that can be dimmed"),
    "quick dry": ("that dries fast", "fast drying"),
    "wrinkle free": ("that needs no ironing", "wrinkle resistant"),
    "bamboo": ("made of bamboo", "bamboo based"),
    "foldable": ("that folds flat", "collapsible"),
    "non slip": ("that does not slide around", "anti slip"),
    "easy assembly": ("simple to put together", "quick to assemble"),
    "durable": ("built to last", "tough enough for years"),
    "orthopedic": ("with orthopedic support", "supportive for old joints"),
    "reflective": ("visible at night", "with reflective stitching"),
    "odor control": ("that controls smells", "that keeps odors down"),
    "natural rubber": ("made of natural rubber", "of real rubber"),
    "washable cover": ("with a cover you can wash", "whose cover goes in the wash"),
    "tear resistant": ("that resists tearing", "rip proof"),
    "grain free": ("without grain", "with no grains"),
    "dust free": ("that makes no dust", "low dust"),
    "vet approved": ("approved by vets", "vet recommended"),
}

# Product type -> other names a shopper uses for it.
TYPE_PHRASES: dict[str, tuple[str, ...]] = {
    "tee": ("t-shirt", "t shirt"), "hoodie": ("hooded sweatshirt", "pullover hoodie"),
    "jeans": ("pair of jeans", "denim pants"), "dress": ("dress", "frock"), "rain jacket": ("raincoat", "rain coat"),
    "running shorts": ("jogging shorts", "shorts for running"), "shampoo": ("hair shampoo", "shampoo"),
    "moisturizer": ("face cream", "moisturizing cream"), "lip balm": ("chapstick", "lip salve"),
    "face serum": ("facial serum", "serum for the face"), "sunscreen": ("sun cream", "sunblock"),
    "hair oil": ("oil for my hair", "hair treatment oil"), "green tea": ("green tea", "box of green tea"),
    "coffee beans": ("whole bean coffee", "bag of coffee beans"), "granola": ("granola cereal", "bag of granola"),
    "dark chocolate": ("dark chocolate bar", "bar of dark chocolate"),
    "pasta sauce": ("sauce for pasta", "jar of pasta sauce"), "almond butter": ("almond spread", "jar of almond butter"),
    "usb c cable": ("usb-c charging cord", "type-c cable"), "phone case": ("phone cover", "case for my phone"),
    "wireless earbuds": ("true wireless headphones", "in-ear wireless buds"),
    "power bank": ("portable battery pack", "battery pack"), "wireless charger": ("charging pad", "qi charging pad"),
    "hdmi adapter": ("hdmi dongle", "adapter with hdmi out"), "throw pillow": ("decorative cushion", "sofa cushion"),
    "bath towel": ("towel for the bathroom", "set of bath towels"), "desk lamp": ("table lamp", "reading lamp"),
    "storage basket": ("storage bin", "basket for storage"), "bed sheet set": ("set of bed sheets", "sheet set"),
    "shower curtain": ("curtain for the shower", "bath curtain"), "dog bed": ("bed for my dog", "dog bed"),
    "cat toy": ("toy for my cat", "cat toy"), "dog leash": ("dog lead", "leash for my dog"),
    "pet shampoo": ("shampoo for my pet", "pet wash"), "cat litter": ("litter for my cat", "kitty litter"),
    "chew toy": ("chew toy for my dog", "dog chew"),
}  # fmt: skip

# Title templates: {brand}, {style}, {ptype}, {attrs} (the attributes the title shows), {use}.
TITLE_TEMPLATES: tuple[str, ...] = (
    "{brand} {style} {attrs} {ptype}",
    "{brand} {ptype} - {attrs}",
    "{ptype} by {brand}: {attrs} ({style})",
    "{brand} {attrs} {ptype} for {use}",
    "{style} {ptype} | {brand} | {attrs}",
    "{brand} {ptype}, {style} Edition, {attrs}",
)
USES: dict[str, str] = {
    "clothing": "Men and Women", "beauty": "Daily Care", "grocery": "the Pantry", "electronics": "Home and Travel",
    "home": "Bedroom and Living Room", "pets": "Dogs and Cats",
}  # fmt: skip
BLURBS: dict[str, tuple[str, ...]] = {
    "clothing": ("Cut for a relaxed everyday look.", "Holds its shape wash after wash.", "Pairs with anything."),
    "beauty": ("Dermatologist tested.", "A little goes a long way.", "Absorbs without a greasy feel."),
    "grocery": ("Small batch, packed fresh.", "A pantry staple.", "Great for breakfast or a snack."),
    "electronics": ("Works with most phones and laptops.", "Backed by an 18-month warranty.", "Tested to 10,000 uses."),
    "home": ("Looks at home in any room.", "Easy to care for.", "Made to brighten a space."),
    "pets": ("Loved by pets and their people.", "Tested by real pets.", "Made for daily use."),
}  # fmt: skip
