"""What a run sends: dataset items and their formats (``items``, ``formats``, ``formats_chat``,
``formats_table``, ``formats_inspect``), synthetic prompts of set lengths (``synthetic``), the tokenizer
that counts them (``tokenizer``), timed traces (``trace``), sampling a dataset (``sampling``) and the L3
corpus (``corpus``). Imports ``measure`` (records, histograms) only."""
