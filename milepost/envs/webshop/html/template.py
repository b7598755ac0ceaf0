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
 button.title-link { background: none; border: none; padding: 0; color: #0066c0; cursor: pointer; font-size: 15px; text-align: left; }
 button.title-link:hover { text-decoration: underline; color: #c45500; }
 .pid { color: #888; font-size: 12px; font-family: monospace; }
 .panel { background: #fff; border: 1px solid #ddd; padding: 6px 12px; margin: 10px 0; font-size: 14px; }
 .panel h4 { margin: 4px 0; }
 .tick { color: #067d06; font-weight: bold; }
 .todo { color: #999; }
 .reasoning { color: #555; font-style: italic; }
 .error { color: #b00; }
</style>
</head>
<body>
<header>
 <div>milepost shop</div>
 <div class="instruction" id="instruction">Instruction: {{ instruction }}</div>
</header>
<main>
 {% if cart %}<div class="cart" id="cart"><b>Cart ({{ cart|length }} item{{ "s" if cart|length != 1 else "" }}, {{ cart_total }})</b>
  <ul>{% for line in cart %}<li class="cart-line">{{ line.title }} <span class="pid">{{ line.pid }}</span> - {{ line.options }} - <span class="price">{{ line.price }}</span></li>{% endfor %}</ul></div>{% endif %}
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
   <div class="result">{{ click(r.pid, r.title, "title-link") }} <span class="pid" title="the id an agent clicks: click[{{ r.pid }}]">{{ r.pid }}</span> <span class="price">{{ r.price }}</span></div>
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
 <div class="status" id="status">step {{ steps }} | reward {{ "%.3f"|format(total_reward) }} | subgoals {{ done_subgoals }}/{{ num_subgoals }} | <span id="remaining">{% if remaining is none %}no purchase can succeed from here (a wrong line is in the cart or was bought){% else %}remaining: {{ remaining }} action{{ "s" if remaining != 1 else "" }} (search / click) to a successful purchase, at the fewest{% endif %}</span>{% if over %} | episode over: {{ reason }}{% endif %}</div>
 <div class="panel" id="subgoals"><h4>The order's subgoals</h4><ol>{% for text, done in subgoals %}<li class="{{ 'done' if done else 'open' }}">{% if done %}<span class="tick">&#10003;</span>{% else %}<span class="todo">&#9744;</span>{% endif %} {{ text }}</li>{% endfor %}</ol></div>
 {% if replay_left is not none %}<form method="post" action="/replay/next"><button type="submit" id="replay-next" {% if not replay_left %}disabled{% endif %}>Replay next step ({{ replay_left }} left)</button>{% if replay_next %} <span id="replay-upcoming">next: <code>{{ replay_next.action }}</code>{% if replay_next.reasoning %} <span class="reasoning">{{ replay_next.reasoning }}</span>{% endif %}</span>{% endif %}</form>{% endif %}
 {% if history %}<div class="panel" id="steps"><h4>Steps so far</h4><ol>{% for h in history %}<li value="{{ h.n }}" class="step"><code>{{ h.applied }}</code>{% if h.reasoning %} <span class="reasoning">- {{ h.reasoning }}</span>{% endif %}{% if h.error %} <span class="error">(rejected: {{ h.error }})</span>{% endif %} <span class="pid">reward {{ "%+.2f"|format(h.reward) }}</span></li>{% endfor %}</ol></div>{% endif %}
 <form method="post" action="/reset"><button type="submit" id="reset">Start over</button></form>
</main>
</body>
</html>
"""
