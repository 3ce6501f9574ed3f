"""Distillation: LoRA fine-tuning of an embedded model on the expert's trajectories.

* :mod:`.sft`: ``train()`` reads the base model from its GGUF file, fine-tunes a LoRA on
  ``lookplangraph distill data``'s chat examples (loss on the answers only) and writes the adapter;
* :mod:`.answer_logits`: that loss from the logits of the answer positions only;
* :mod:`.gguf_lora`: the PEFT adapter as a GGUF LoRA that llama.cpp applies to the unchanged
  base (``--lm llamacpp:BASE+ADAPTER``), and such a file read back to train on from it
  (``distill train --init-adapter``);
* :mod:`.lineage`: a run's record stamped into a copy of its adapter (``distill stamp``), and
  the stages of an adapter trained from such a copy;
* :mod:`.merge`: an adapter merged into its base's weights and quantized again;
* :mod:`.mix`: one training set from several (planning data, DAgger rounds, Cypher data) in
  chosen amounts (``lookplangraph distill mix``);
* :mod:`.chunks`: large files cut into checked chunks, for carrying to a GPU machine.

The training stack (torch, transformers, peft, gguf, accelerate) is the ``distill`` extra;
nothing here imports it at module level.
"""
