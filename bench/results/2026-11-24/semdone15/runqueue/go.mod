module runqueue

go 1.26
