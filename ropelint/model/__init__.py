"""The RoPE model: what each expression of a rotary module holds, and what happens to it."""
