# ruff: noqa: E501 - HTML lines of the template
"""The page template (Jinja2, autoescaped). Kept in Python so it ships with the package without package data."""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>milepost shop - {{ page }}</title>
<style>
 body { font-family: sans-serif; margin: 0; background: #f5f5f5; }
 header { background: #232f3e; color: #fff; padding: 10px 16px; }
 header .instruction { font-size: 14px; margin-top: 6px; color: #ffd; }
 main { padding: 16px; max-width: 980px; }
 .cart { background: #fff8e1; padding: 6px 10px; margin-bottom: 10px; }
 .result { background: #fff; padding: 8px; margin: 6px 0; border: 1px solid #ddd; }
 .price { color: #b12704; font-weight: bold; }
 .option-group { margin: 8px 0; }
 .selected { background: #febd69; }
 form.inline { display: inline; }
 button { margin: 2px; }
 .status { font-size: 13px; color: #555; margin-top: 14px; }
 .feedback { color: #b00; }
</style>
</head>
<body>
<header>
 <div>milepost shop</div>
 <div class="instruction" id="instruction">Instruction: {{ instruction }}</div>
</header>
<main>
 {% if cart %}<div class="cart" id="cart">Cart ({{ cart|length }}): {% for line in cart %}{{ line }}{% if not loop.last %}; {% endif %}{% endfor %}</div>{% endif %}
 {% if feedback %}<div class="feedback" id="feedback">{{ feedback }}</div>{% endif %}
 {% macro click(value, label=None, cls="") -%}
 <form class="inline" method="post" action="/act"><input type="hidden" name="action" value="click[{{ value }}]"><button type="submit" id="{{ ids[value] }}" class="{{ cls }}">{{ label or value }}</button></form>
 {%- endmacro %}
 {% if page == "search" %}
  <form method="post" action="/search" id="search-form">
   <input type="text" name="query" id="search-input" size="60" maxlength="{{ max_query }}" autofocus>
   <button type="submit" id="search-button">Search</button>
  </form>
  {% if cart %}{{ click("Checkout") }}{% endif %}
 {% elif page == "results" %}
  {{ click("Back to Search") }}
  <div id="results-header">Page {{ page_no + 1 }} (Total results: {{ total }}) for "{{ query }}"</div>
  {% if has_prev %}{{ click("< Prev") }}{% endif %}{% if has_next %}{{ click("Next >") }}{% endif %}
  {% for r in results %}
   <div class="result">{{ click(r.pid) }} <span class="title">{{ r.title }}</span> <span class="price">{{ r.price }}</span></div>
  {% endfor %}
 {% elif page == "item" %}
  {{ click("Back to Search") }} {{ click("< Prev") }}
  <h2 id="product-title">{{ product.title }}</h2>
  <div class="price" id="product-price">Price: {{ product.price }}</div>
  <div>Rating: {{ product.rating }}</div>
  {% for dim, values, chosen in options %}
   <div class="option-group"><b>{{ dim }}</b>:
   {% for v in values %}{{ click(v, cls="selected" if v == chosen else "") }}{% endfor %}</div>
  {% endfor %}
  <div>{{ click("Description") }}{{ click("Features") }}{{ click("Reviews") }}</div>
  <div>{{ click("Add to Cart") }}{{ click("Buy Now") }}</div>
 {% elif page == "tab" %}
  {{ click("Back to Search") }} {{ click("< Prev") }}
  <h3>{{ tab }}</h3>
  {% for line in tab_lines %}<p>{{ line }}</p>{% endfor %}
 {% else %}
  <h2 id="done">Thank you for shopping with us!</h2>
 {% endif %}
 <div class="status" id="status">step {{ steps }} | reward {{ "%.3f"|format(total_reward) }} | subgoals {{ done_subgoals }}/{{ num_subgoals }} | remaining {{ remaining }}{% if over %} | episode over: {{ reason }}{% endif %}</div>
 {% if replay_left is not none %}<form method="post" action="/replay/next"><button type="submit" id="replay-next" {% if not replay_left %}disabled{% endif %}>Replay next step ({{ replay_left }} left)</button></form>{% endif %}
 <form method="post" action="/reset"><button type="submit" id="reset">Start over</button></form>
</main>
</body>
</html>
"""
