"""``lookplangraph reproduce``: the paper's Tables II–V from one command.

:mod:`.tables` says what each table is made of (rows = configs in ``configs/``, columns = GraSIF
splits, the paper's figures); :mod:`.run` runs every cell resumably on the same tasks;
:mod:`.report` writes Markdown/CSV/JSON tables with the paper's figures beside ours, and plots.
"""
