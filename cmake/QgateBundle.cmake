# The `bundle` target: a relocatable dist/qgate/ folder (filled in below).
