"""Evaluation on GraSIF: episodes and batch runs with traces and resumable results
(:mod:`.runner`), run settings (:mod:`.settings`), the error-injection policy and its curve
(:mod:`.injection`, :mod:`.injection_curve`), the graph augmentation scored on GraSIF (:mod:`.gam_eval`), the paper's tables (:mod:`.reproduce`) and a
scripted OpenAI-style server for measuring the harness (:mod:`.scripted_server`)."""
