"""Small torch models shared by the Python tests."""

import torch


class Net(torch.nn.Module):
    """A convolution and two linear layers, on 1x8x8 inputs, 10 classes."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))
