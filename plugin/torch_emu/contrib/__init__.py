"""Optional helpers that change global behaviour when imported (see transfer_to_emu)."""
