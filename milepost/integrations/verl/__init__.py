"""verl adapter: milepost episodes as a verl agent loop, and the paper's advantage as a verl advantage estimator.

``turns`` (the per-turn reward layout on a token sequence and the advantage over it) and ``estimator`` (the
estimator's arithmetic and its settings) are plain torch and import without verl; ``agent_loop`` and
``advantage`` need verl (``pip install -e '.[verl]'``, its own venv: verl pins transformers<5.11). Importing
``milepost.integrations.verl.agent_loop`` registers both with verl: the agent loop as ``milepost_agent``
(``verl.experimental.agent_loop.register``) and the estimator as ``milepost``
(``verl.trainer.ppo.core_algos.register_adv_est``). ``docs/scaling.md`` has the launch command.
"""
